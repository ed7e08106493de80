package ha

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Magic starts HELLO and WELCOME ("BLHA").
const Magic uint32 = 0x424C4841

// Protocol versions. Version 2 adds epoch entries to HELLO and WELCOME and
// the TRUNCATE frame; a master serves version 1 slaves as before.
const (
	Version1 uint16 = 1
	Version2 uint16 = 2
	// Version is the newest version this package speaks.
	Version = Version2
)

// MaxDataLen bounds a DATA frame's payload: one record can be at most a
// segment minus a blank, and bodies are capped far below this.
const MaxDataLen = 64 << 20

// Kind is a frame's first byte.
type Kind byte

// Frame kinds.
const (
	KindHello   Kind = 'H'
	KindWelcome Kind = 'W'
	KindRefuse  Kind = 'R'
	KindData    Kind = 'D'
	KindBeat    Kind = 'B'
	KindAck     Kind = 'A'
	// KindTruncate (version 2): the slave must cut its log to a fork
	// point before it replicates.
	KindTruncate Kind = 'T'
	// KindAuth: the slave's credentials, sent before HELLO by a slave
	// that has some (any version).
	KindAuth Kind = 'U'
)

func (k Kind) String() string {
	switch k {
	case KindHello:
		return "HELLO"
	case KindWelcome:
		return "WELCOME"
	case KindRefuse:
		return "REFUSE"
	case KindData:
		return "DATA"
	case KindBeat:
		return "BEAT"
	case KindAck:
		return "ACK"
	case KindTruncate:
		return "TRUNCATE"
	case KindAuth:
		return "AUTH"
	}
	return fmt.Sprintf("Kind(%#x)", byte(k))
}

// RefuseCode says why a master refused a slave.
type RefuseCode uint16

// Refuse codes.
const (
	RefuseDiverged  RefuseCode = 1
	RefuseTooOld    RefuseCode = 2
	RefuseMismatch  RefuseCode = 3
	RefuseNotMaster RefuseCode = 4
	RefuseBadHello  RefuseCode = 5
	RefuseInternal  RefuseCode = 6
	// RefuseUnauthenticated: the master checks credentials and the slave
	// sent none, or they were refused. The slave retries with backoff (the
	// master's users may change).
	RefuseUnauthenticated RefuseCode = 7
)

func (c RefuseCode) String() string {
	switch c {
	case RefuseDiverged:
		return "DIVERGED"
	case RefuseTooOld:
		return "TOO_OLD"
	case RefuseMismatch:
		return "MISMATCH"
	case RefuseNotMaster:
		return "NOT_MASTER"
	case RefuseBadHello:
		return "BAD_HELLO"
	case RefuseInternal:
		return "INTERNAL"
	case RefuseUnauthenticated:
		return "UNAUTHENTICATED"
	}
	return fmt.Sprintf("RefuseCode(%d)", uint16(c))
}

// Fatal reports whether a slave must stop replicating after this refusal
// (retrying the same master cannot help): divergence, a log too old for
// the master's retention, or a misconfiguration.
func (c RefuseCode) Fatal() bool {
	return c == RefuseDiverged || c == RefuseTooOld || c == RefuseMismatch
}

// Hello is the slave's handshake.
type Hello struct {
	Version    uint16
	BrokerName string
	BrokerID   int64
	MaxOffset  int64
	// LastStart is the start of the slave's last record (-1: none);
	// LastSize and LastChecksum describe it.
	LastStart    int64
	LastSize     int32
	LastChecksum uint32
	// Epochs (version 2) are the slave's epoch entries, oldest first
	// (ValidateEpochs); a version 1 HELLO carries none.
	Epochs []EpochEntry
}

// Welcome is the master's acceptance.
type Welcome struct {
	Version     uint16
	Start       int64
	MinOffset   int64
	MaxOffset   int64
	SegmentSize int64
	Epoch       int64
	MasterAddr  string
	// Epochs (version 2) are the master's epoch entries, oldest first;
	// nil when the master keeps none (or in version 1).
	Epochs []EpochEntry
}

// Truncate tells a slave whose log holds bytes the master does not have
// to cut it at Fork (the fork point of the two epoch histories, below the
// slave's end) and connect again; Epoch is the master's epoch.
type Truncate struct {
	Fork  int64
	Epoch int64
}

// Auth is a slave's credentials: the signed-date header of Bolide's
// protocols (package auth), as the two values a gRPC call carries in its
// metadata. The package does not interpret them: the master hands them to
// ServerOptions.Authenticate.
type Auth struct {
	Authorization string
	Date          string
}

// Refuse is the master's refusal.
type Refuse struct {
	Code   RefuseCode
	Reason string
}

func (r Refuse) Error() string { return fmt.Sprintf("master refused: %s: %s", r.Code, r.Reason) }

// Frame is one decoded frame; which fields are set depends on Kind.
type Frame struct {
	Kind    Kind
	Hello   Hello   // HELLO
	Welcome Welcome // WELCOME
	Refuse  Refuse  // REFUSE
	// Truncate is TRUNCATE's content.
	Truncate Truncate
	// Auth is AUTH's content.
	Auth Auth
	// Offset is DATA's offset, BEAT's committed offset and ACK's applied
	// offset.
	Offset int64
	// Timestamp is BEAT's clock and ACK's store timestamp (ms).
	Timestamp int64
	// Data is DATA's payload.
	Data []byte
}

// ErrFrame reports bytes that are not a valid frame.
var ErrFrame = errors.New("ha: bad frame")

const (
	helloFixed   = 1 + 4 + 2 + 8 + 8 + 8 + 4 + 4 + 2 // up to the name
	welcomeFixed = 1 + 4 + 2 + 8 + 8 + 8 + 8 + 8 + 2 // up to the address
	refuseFixed  = 1 + 2 + 2
	dataHeader   = 1 + 8 + 4
	beatLen      = 1 + 8 + 8
	truncateLen  = 1 + 8 + 8
	authFixed    = 1 + 4 + 2 // up to the authorization
	entryLen     = 8 + 8
	maxString    = 1<<16 - 1
)

var be = binary.BigEndian

func appendString(dst []byte, s string) []byte {
	dst = be.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func checkString(what, s string) error {
	if len(s) > maxString {
		return fmt.Errorf("%w: %s of %d bytes", ErrFrame, what, len(s))
	}
	return nil
}

// hasEpochs reports whether a HELLO or WELCOME of version v carries epoch
// entries.
func hasEpochs(v uint16) bool { return v >= Version2 }

func checkEpochs(what string, v uint16, entries []EpochEntry) error {
	if !hasEpochs(v) {
		if len(entries) > 0 {
			return fmt.Errorf("%w: %s of version %d cannot carry epoch entries", ErrFrame, what, v)
		}
		return nil
	}
	if err := ValidateEpochs(entries); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrFrame, what, err)
	}
	return nil
}

func appendEpochs(dst []byte, entries []EpochEntry) []byte {
	dst = be.AppendUint16(dst, uint16(len(entries)))
	for _, e := range entries {
		dst = be.AppendUint64(dst, uint64(e.Epoch))
		dst = be.AppendUint64(dst, uint64(e.Start))
	}
	return dst
}

// AppendHello appends a HELLO frame; entries follow the name from version
// 2 on.
func AppendHello(dst []byte, h Hello) ([]byte, error) {
	if err := checkString("broker name", h.BrokerName); err != nil {
		return dst, err
	}
	if err := checkEpochs("HELLO", h.Version, h.Epochs); err != nil {
		return dst, err
	}
	dst = append(dst, byte(KindHello))
	dst = be.AppendUint32(dst, Magic)
	dst = be.AppendUint16(dst, h.Version)
	dst = be.AppendUint64(dst, uint64(h.BrokerID))
	dst = be.AppendUint64(dst, uint64(h.MaxOffset))
	dst = be.AppendUint64(dst, uint64(h.LastStart))
	dst = be.AppendUint32(dst, uint32(h.LastSize))
	dst = be.AppendUint32(dst, h.LastChecksum)
	dst = appendString(dst, h.BrokerName)
	if hasEpochs(h.Version) {
		dst = appendEpochs(dst, h.Epochs)
	}
	return dst, nil
}

// AppendWelcome appends a WELCOME frame; entries follow the address from
// version 2 on.
func AppendWelcome(dst []byte, w Welcome) ([]byte, error) {
	if err := checkString("master address", w.MasterAddr); err != nil {
		return dst, err
	}
	if err := checkEpochs("WELCOME", w.Version, w.Epochs); err != nil {
		return dst, err
	}
	dst = append(dst, byte(KindWelcome))
	dst = be.AppendUint32(dst, Magic)
	dst = be.AppendUint16(dst, w.Version)
	for _, v := range []int64{w.Start, w.MinOffset, w.MaxOffset, w.SegmentSize, w.Epoch} {
		dst = be.AppendUint64(dst, uint64(v))
	}
	dst = appendString(dst, w.MasterAddr)
	if hasEpochs(w.Version) {
		dst = appendEpochs(dst, w.Epochs)
	}
	return dst, nil
}

// AppendTruncate appends a TRUNCATE frame.
func AppendTruncate(dst []byte, t Truncate) []byte {
	dst = append(dst, byte(KindTruncate))
	dst = be.AppendUint64(dst, uint64(t.Fork))
	return be.AppendUint64(dst, uint64(t.Epoch))
}

// AppendAuth appends an AUTH frame.
func AppendAuth(dst []byte, a Auth) ([]byte, error) {
	if err := checkString("authorization", a.Authorization); err != nil {
		return dst, err
	}
	if err := checkString("date", a.Date); err != nil {
		return dst, err
	}
	dst = append(dst, byte(KindAuth))
	dst = be.AppendUint32(dst, Magic)
	dst = appendString(dst, a.Authorization)
	return appendString(dst, a.Date), nil
}

// AppendRefuse appends a REFUSE frame; a reason longer than the field
// allows is cut.
func AppendRefuse(dst []byte, r Refuse) []byte {
	reason := r.Reason
	if len(reason) > maxString {
		reason = reason[:maxString]
	}
	dst = append(dst, byte(KindRefuse))
	dst = be.AppendUint16(dst, uint16(r.Code))
	return appendString(dst, reason)
}

// AppendDataHeader appends the 13-byte header of a DATA frame whose payload
// of n bytes follows it on the wire.
func AppendDataHeader(dst []byte, offset int64, n int) []byte {
	dst = append(dst, byte(KindData))
	dst = be.AppendUint64(dst, uint64(offset))
	return be.AppendUint32(dst, uint32(n))
}

// AppendBeat appends a BEAT frame.
func AppendBeat(dst []byte, committed, nowMs int64) []byte {
	dst = append(dst, byte(KindBeat))
	dst = be.AppendUint64(dst, uint64(committed))
	return be.AppendUint64(dst, uint64(nowMs))
}

// AppendAck appends an ACK frame.
func AppendAck(dst []byte, applied, storeTs int64) []byte {
	dst = append(dst, byte(KindAck))
	dst = be.AppendUint64(dst, uint64(applied))
	return be.AppendUint64(dst, uint64(storeTs))
}

// ReadFrame reads one frame from r. A DATA payload is read into buf (grown
// when too small) and Frame.Data aliases it. maxData bounds a DATA payload
// (at most MaxDataLen). A version 2 HELLO or WELCOME carries at most
// MaxEpochEntries epoch entries, which must pass ValidateEpochs. Any
// malformed frame is an error wrapping ErrFrame;
// a stream that ends inside a frame is io.ErrUnexpectedEOF, one that ends
// between frames io.EOF.
func ReadFrame(r io.Reader, maxData int, buf []byte) (Frame, error) {
	if maxData <= 0 || maxData > MaxDataLen {
		maxData = MaxDataLen
	}
	var hdr [welcomeFixed]byte
	if _, err := io.ReadFull(r, hdr[:1]); err != nil {
		return Frame{}, err
	}
	f := Frame{Kind: Kind(hdr[0])}
	fixed := func(n int) ([]byte, error) {
		b := hdr[:n]
		if _, err := io.ReadFull(r, b[1:]); err != nil {
			return nil, unexpected(err)
		}
		return b, nil
	}
	readEpochs := func(what string) ([]EpochEntry, error) {
		b, err := readN(r, 2)
		if err != nil {
			return nil, err
		}
		n := int(be.Uint16(b))
		if n > MaxEpochEntries {
			return nil, fmt.Errorf("%w: %s with %d epoch entries (limit %d)", ErrFrame, what, n, MaxEpochEntries)
		}
		if n == 0 {
			return nil, nil
		}
		if b, err = readN(r, n*entryLen); err != nil {
			return nil, err
		}
		entries := make([]EpochEntry, n)
		for i := range entries {
			entries[i] = EpochEntry{Epoch: int64(be.Uint64(b[i*entryLen:])), Start: int64(be.Uint64(b[i*entryLen+8:]))}
		}
		if err := ValidateEpochs(entries); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFrame, what, err)
		}
		return entries, nil
	}
	readString := func(n int) (string, error) {
		if n == 0 {
			return "", nil
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", unexpected(err)
		}
		return string(b), nil
	}
	switch f.Kind {
	case KindHello:
		b, err := fixed(helloFixed)
		if err != nil {
			return f, err
		}
		if m := be.Uint32(b[1:]); m != Magic {
			return f, fmt.Errorf("%w: HELLO magic %#x", ErrFrame, m)
		}
		f.Hello = Hello{
			Version:      be.Uint16(b[5:]),
			BrokerID:     int64(be.Uint64(b[7:])),
			MaxOffset:    int64(be.Uint64(b[15:])),
			LastStart:    int64(be.Uint64(b[23:])),
			LastSize:     int32(be.Uint32(b[31:])),
			LastChecksum: be.Uint32(b[35:]),
		}
		if f.Hello.BrokerName, err = readString(int(be.Uint16(b[39:]))); err != nil {
			return f, err
		}
		if hasEpochs(f.Hello.Version) {
			if f.Hello.Epochs, err = readEpochs("HELLO"); err != nil {
				return f, err
			}
		}
		return f, nil
	case KindWelcome:
		b, err := fixed(welcomeFixed)
		if err != nil {
			return f, err
		}
		if m := be.Uint32(b[1:]); m != Magic {
			return f, fmt.Errorf("%w: WELCOME magic %#x", ErrFrame, m)
		}
		f.Welcome = Welcome{
			Version:     be.Uint16(b[5:]),
			Start:       int64(be.Uint64(b[7:])),
			MinOffset:   int64(be.Uint64(b[15:])),
			MaxOffset:   int64(be.Uint64(b[23:])),
			SegmentSize: int64(be.Uint64(b[31:])),
			Epoch:       int64(be.Uint64(b[39:])),
		}
		if f.Welcome.MasterAddr, err = readString(int(be.Uint16(b[47:]))); err != nil {
			return f, err
		}
		if hasEpochs(f.Welcome.Version) {
			if f.Welcome.Epochs, err = readEpochs("WELCOME"); err != nil {
				return f, err
			}
		}
		return f, nil
	case KindRefuse:
		b, err := fixed(refuseFixed)
		if err != nil {
			return f, err
		}
		f.Refuse.Code = RefuseCode(be.Uint16(b[1:]))
		if f.Refuse.Reason, err = readString(int(be.Uint16(b[3:]))); err != nil {
			return f, err
		}
		return f, nil
	case KindData:
		b, err := fixed(dataHeader)
		if err != nil {
			return f, err
		}
		f.Offset = int64(be.Uint64(b[1:]))
		n := int64(int32(be.Uint32(b[9:])))
		if f.Offset < 0 {
			return f, fmt.Errorf("%w: DATA at negative offset %d", ErrFrame, f.Offset)
		}
		if n <= 0 || n > int64(maxData) {
			return f, fmt.Errorf("%w: DATA of %d bytes (limit %d)", ErrFrame, n, maxData)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		f.Data = buf[:n]
		if _, err := io.ReadFull(r, f.Data); err != nil {
			return f, unexpected(err)
		}
		return f, nil
	case KindBeat, KindAck:
		b, err := fixed(beatLen)
		if err != nil {
			return f, err
		}
		f.Offset = int64(be.Uint64(b[1:]))
		f.Timestamp = int64(be.Uint64(b[9:]))
		if f.Offset < 0 {
			return f, fmt.Errorf("%w: %s of negative offset %d", ErrFrame, f.Kind, f.Offset)
		}
		return f, nil
	case KindAuth:
		b, err := fixed(authFixed)
		if err != nil {
			return f, err
		}
		if m := be.Uint32(b[1:]); m != Magic {
			return f, fmt.Errorf("%w: AUTH magic %#x", ErrFrame, m)
		}
		if f.Auth.Authorization, err = readString(int(be.Uint16(b[5:]))); err != nil {
			return f, err
		}
		b, err = readN(r, 2)
		if err != nil {
			return f, err
		}
		if f.Auth.Date, err = readString(int(be.Uint16(b))); err != nil {
			return f, err
		}
		return f, nil
	case KindTruncate:
		b, err := fixed(truncateLen)
		if err != nil {
			return f, err
		}
		f.Truncate = Truncate{Fork: int64(be.Uint64(b[1:])), Epoch: int64(be.Uint64(b[9:]))}
		if f.Truncate.Fork < 0 || f.Truncate.Epoch < 0 {
			return f, fmt.Errorf("%w: TRUNCATE at %d for epoch %d", ErrFrame, f.Truncate.Fork, f.Truncate.Epoch)
		}
		return f, nil
	}
	return f, fmt.Errorf("%w: unknown kind %#x", ErrFrame, hdr[0])
}

// readN reads n bytes that must be there (the frame has begun).
func readN(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, unexpected(err)
	}
	return b, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
