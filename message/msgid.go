package message

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// ErrBadMsgID reports a string that is not a message id.
var ErrBadMsgID = errors.New("malformed message id")

// OffsetMsgID builds the offset message id of a stored record: the store host
// followed by the CommitLog offset, as upper-case hex (32 characters for an
// IPv4 host, 56 for IPv6).
func OffsetMsgID(storeHost netip.AddrPort, physicalOffset int64) string {
	var buf [56]byte
	return string(AppendOffsetMsgID(buf[:0], storeHost, physicalOffset))
}

// OffsetMsgIDLen is the length of every offset message id of storeHost.
func OffsetMsgIDLen(storeHost netip.AddrPort) int {
	return 2 * (hostLen(isV6(storeHost)) + 8) // host and port, then the offset, in hex
}

// AppendOffsetMsgID appends OffsetMsgID(storeHost, physicalOffset) to dst,
// OffsetMsgIDLen(storeHost) bytes.
func AppendOffsetMsgID(dst []byte, storeHost netip.AddrPort, physicalOffset int64) []byte {
	var raw [28]byte
	b := appendHost(raw[:0], storeHost)
	b = binary.BigEndian.AppendUint64(b, uint64(physicalOffset))
	return appendUpperHex(dst, b)
}

// appendUpperHex appends b in hex with upper-case digits.
func appendUpperHex(dst, b []byte) []byte {
	const digits = "0123456789ABCDEF"
	for _, c := range b {
		dst = append(dst, digits[c>>4], digits[c&0x0F])
	}
	return dst
}

// ParseOffsetMsgID splits an offset message id into its store host and
// CommitLog offset.
func ParseOffsetMsgID(id string) (netip.AddrPort, int64, error) {
	if len(id) != 32 && len(id) != 56 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: %q has %d characters, want 32 or 56", ErrBadMsgID, id, len(id))
	}
	b, err := hex.DecodeString(id)
	if err != nil {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: %q: %w", ErrBadMsgID, id, err)
	}
	if b[len(b)-12] != 0 || b[len(b)-11] != 0 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: %q: port out of range", ErrBadMsgID, id)
	}
	host := decodeHost(b[:len(b)-8])
	off := int64(binary.BigEndian.Uint64(b[len(b)-8:]))
	if off < 0 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: %q: negative offset", ErrBadMsgID, id)
	}
	return host, off, nil
}

// UniqueIDGenerator makes producer-side unique ids (UNIQ_KEY): 16 bytes as 32
// upper-case hex characters — a 4-byte client address, the 2-byte process
// id, a 4-byte random prefix chosen at start, 4 bytes of milliseconds since
// the start of the current month and a 2-byte counter. Ids from one generator
// never repeat within a month unless more than 65 536 are made in one
// millisecond; the random prefix separates generators and restarts.
type UniqueIDGenerator struct {
	mu         sync.Mutex
	prefix     [10]byte
	monthStart time.Time
	nextMonth  time.Time
	counter    uint16
	now        func() time.Time
}

// NewUniqueIDGenerator returns a generator for a client at addr (the zero
// Addr is allowed and uses random bytes instead).
func NewUniqueIDGenerator(addr netip.Addr) *UniqueIDGenerator {
	g := &UniqueIDGenerator{now: time.Now}
	if addr.Is4() || addr.Is4In6() {
		a := addr.Unmap().As4()
		copy(g.prefix[:4], a[:])
	} else {
		_, _ = rand.Read(g.prefix[:4])
	}
	binary.BigEndian.PutUint16(g.prefix[4:], uint16(os.Getpid()))
	_, _ = rand.Read(g.prefix[6:10])
	return g
}

// Next returns a new unique id.
func (g *UniqueIDGenerator) Next() string {
	var id [uniqueIDLen]byte
	g.mu.Lock()
	g.appendLocked(id[:0], g.msLocked())
	g.mu.Unlock()
	return string(id[:])
}

// NextN returns n new unique ids, as n calls of Next in the same
// millisecond would, cut from one string: a batch takes the generator's
// lock, reads the clock and allocates once, not once a message.
func (g *UniqueIDGenerator) NextN(n int) []string {
	var all strings.Builder
	all.Grow(n * uniqueIDLen)
	var id [uniqueIDLen]byte
	g.mu.Lock()
	ms := g.msLocked()
	for range n {
		all.Write(g.appendLocked(id[:0], ms))
	}
	g.mu.Unlock()
	s := all.String()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = s[i*uniqueIDLen : (i+1)*uniqueIDLen]
	}
	return ids
}

// uniqueIDLen is the length of a unique id: 16 bytes in hex.
const uniqueIDLen = 32

// msLocked returns the milliseconds since the start of the month, moving
// on to a new month when one has begun.
func (g *UniqueIDGenerator) msLocked() uint32 {
	now := g.now()
	if !now.Before(g.nextMonth) {
		y, m, _ := now.Date()
		g.monthStart = time.Date(y, m, 1, 0, 0, 0, 0, now.Location())
		g.nextMonth = g.monthStart.AddDate(0, 1, 0)
	}
	return uint32(now.Sub(g.monthStart).Milliseconds())
}

// appendLocked appends the next id at ms to dst, in upper-case hex.
func (g *UniqueIDGenerator) appendLocked(dst []byte, ms uint32) []byte {
	g.counter++
	var b [16]byte
	copy(b[:10], g.prefix[:])
	binary.BigEndian.PutUint32(b[10:], ms)
	binary.BigEndian.PutUint16(b[14:], g.counter)
	return appendUpperHex(dst, b[:])
}

// IsUniqueID reports whether s looks like a unique id (32 hex characters).
// Offset ids of IPv4 hosts have the same shape; callers that accept both try
// the offset form against their own store first.
func IsUniqueID(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
