package pop

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"
)

// HandleVersion is the version of the receipt-handle format this package
// writes (the token's first field).
const HandleVersion = "1"

// handleSep separates the fields of a receipt handle. It is outside the
// alphabet of topic, group and broker names.
const handleSep = ':'

// ErrMalformedHandle reports a receipt handle that does not decode.
var ErrMalformedHandle = errors.New("malformed receipt handle")

// ErrHandleMismatch reports a handle of another group (or a tampered one):
// its check does not match.
var ErrHandleMismatch = errors.New("receipt handle does not belong to the group")

// Handle is what a receipt handle carries.
type Handle struct {
	Broker  string
	Topic   string
	QueueID int32
	Offset  int64
	// Seq is the delivery's handle sequence: the message's state must hold
	// the same sequence for the handle to be valid.
	Seq uint64
	// VisibleAtMS is when the delivery's invisibility was to run out when
	// the handle was issued (informational: auto-renewal extends it).
	VisibleAtMS int64
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// handleCheck ties a token to its group.
func handleCheck(group, body string) uint32 {
	c := crc32.Update(0, castagnoli, []byte(group))
	c = crc32.Update(c, castagnoli, []byte{0})
	return crc32.Update(c, castagnoli, []byte(body))
}

// EncodeHandle makes the token of h for group:
//
//	1:<broker>:<topic>:<queue>:<offset>:<seq>:<visibleAt>:<check>
//
// queue in decimal; offset, seq and visibleAt (Unix ms) in base 36; check is
// 8 upper-case hex digits of CRC-32C over group, a zero byte and every byte
// before the last separator.
func EncodeHandle(group string, h Handle) string {
	var b strings.Builder
	b.Grow(len(h.Broker) + len(h.Topic) + 48)
	b.WriteString(HandleVersion)
	b.WriteByte(handleSep)
	b.WriteString(h.Broker)
	b.WriteByte(handleSep)
	b.WriteString(h.Topic)
	b.WriteByte(handleSep)
	b.WriteString(strconv.FormatInt(int64(h.QueueID), 10))
	b.WriteByte(handleSep)
	b.WriteString(strconv.FormatInt(h.Offset, 36))
	b.WriteByte(handleSep)
	b.WriteString(strconv.FormatUint(h.Seq, 36))
	b.WriteByte(handleSep)
	b.WriteString(strconv.FormatInt(h.VisibleAtMS, 36))
	body := b.String()
	return fmt.Sprintf("%s%c%08X", body, handleSep, handleCheck(group, body))
}

// maxHandleLen bounds a token: two 255-byte names and the numbers.
const maxHandleLen = 640

// DecodeHandle parses a token and checks it against group. It fails with
// ErrMalformedHandle when the token does not parse and ErrHandleMismatch
// when its check is not the group's.
func DecodeHandle(group, token string) (Handle, error) {
	var h Handle
	if len(token) == 0 || len(token) > maxHandleLen {
		return h, fmt.Errorf("%w: %d bytes", ErrMalformedHandle, len(token))
	}
	f := strings.Split(token, string(handleSep))
	if len(f) != 8 {
		return h, fmt.Errorf("%w: %d fields, want 8", ErrMalformedHandle, len(f))
	}
	if f[0] != HandleVersion {
		return h, fmt.Errorf("%w: version %q", ErrMalformedHandle, f[0])
	}
	if !nameOK(f[1]) || !nameOK(f[2]) {
		return h, fmt.Errorf("%w: bad broker or topic name", ErrMalformedHandle)
	}
	h.Broker, h.Topic = f[1], f[2]
	q, err := strconv.ParseInt(f[3], 10, 32)
	if err != nil || q < 0 || f[3] != strconv.FormatInt(q, 10) {
		return h, fmt.Errorf("%w: queue %q", ErrMalformedHandle, f[3])
	}
	h.QueueID = int32(q)
	if h.Offset, err = strconv.ParseInt(f[4], 36, 64); err != nil || h.Offset < 0 || f[4] != strconv.FormatInt(h.Offset, 36) {
		return h, fmt.Errorf("%w: offset %q", ErrMalformedHandle, f[4])
	}
	if h.Seq, err = strconv.ParseUint(f[5], 36, 64); err != nil || h.Seq == 0 || f[5] != strconv.FormatUint(h.Seq, 36) {
		return h, fmt.Errorf("%w: sequence %q", ErrMalformedHandle, f[5])
	}
	if h.VisibleAtMS, err = strconv.ParseInt(f[6], 36, 64); err != nil || h.VisibleAtMS < 0 || f[6] != strconv.FormatInt(h.VisibleAtMS, 36) {
		return h, fmt.Errorf("%w: visible time %q", ErrMalformedHandle, f[6])
	}
	check, err := strconv.ParseUint(f[7], 16, 32)
	if err != nil || len(f[7]) != 8 || f[7] != fmt.Sprintf("%08X", check) {
		return h, fmt.Errorf("%w: check %q", ErrMalformedHandle, f[7])
	}
	body := token[:len(token)-9]
	if uint32(check) != handleCheck(group, body) {
		return h, fmt.Errorf("%w %s", ErrHandleMismatch, group)
	}
	return h, nil
}

// VisibleAt is VisibleAtMS as a time.
func (h Handle) VisibleAt() time.Time { return time.UnixMilli(h.VisibleAtMS) }

// nameOK accepts a non-empty name of the topic alphabet.
func nameOK(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '%' || c == '|') {
			return false
		}
	}
	return true
}
