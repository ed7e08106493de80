package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// DefaultMaxFrame bounds a frame (RocketMQ's default is 16 MiB too).
const DefaultMaxFrame = 16 << 20

// Header serialisations.
const (
	SerializeJSON     byte = 0
	SerializeRocketMQ byte = 1
)

// Codec errors.
var (
	ErrFrameTooLarge = errors.New("remoting: frame too large")
	ErrMalformed     = errors.New("remoting: malformed frame")
)

// AppendFrame appends c as a whole frame (length prefix included) with a
// compact JSON header whose fields are all strings.
func AppendFrame(dst []byte, c *Command) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	hs := len(dst)
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	dst = append(dst, `,"language":`...)
	lang := c.Language
	if lang == "" {
		lang = Language
	}
	dst = appendJSONString(dst, lang)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	if c.Remark != "" {
		dst = append(dst, `,"remark":`...)
		dst = appendJSONString(dst, c.Remark)
	}
	dst = append(dst, `,"extFields":{`...)
	first := true
	for k, v := range c.Ext {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, v)
	}
	dst = append(dst, `},"serializeTypeCurrentRPC":"JSON"}`...)
	headerLen := len(dst) - hs
	dst = append(dst, c.Body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(headerLen)&0xFFFFFF) // JSON: high byte 0
	return dst
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted. Invalid UTF-8 bytes become U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' && b < utf8.RuneSelf {
			i++
			continue
		}
		if b >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// DecodeFrame decodes a frame without its 4-byte length prefix. The body
// aliases frame.
func DecodeFrame(frame []byte) (*Command, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, no header word", ErrMalformed, len(frame))
	}
	word := binary.BigEndian.Uint32(frame)
	serType := byte(word >> 24)
	headerLen := int(word & 0xFFFFFF)
	if headerLen > len(frame)-4 {
		return nil, fmt.Errorf("%w: header length %d beyond the frame's %d bytes", ErrMalformed, headerLen, len(frame)-4)
	}
	header := frame[4 : 4+headerLen]
	var c *Command
	var err error
	switch serType {
	case SerializeJSON:
		c, err = decodeJSONHeader(header)
	case SerializeRocketMQ:
		c, err = decodeBinaryHeader(header)
	default:
		return nil, fmt.Errorf("%w: unknown header serialisation %d", ErrMalformed, serType)
	}
	if err != nil {
		return c, err
	}
	if body := frame[4+headerLen:]; len(body) > 0 {
		c.Body = body
	}
	return c, nil
}

// ReadFrame reads one frame and returns it without its length prefix,
// reusing buf when it is large enough. A frame over max (DefaultMaxFrame
// when max ≤ 0) is ErrFrameTooLarge. Memory grows with the bytes that
// arrive, not with the length the frame claims.
func ReadFrame(r io.Reader, max int, buf []byte) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(lenBuf[:]))
	if n < 4 || n > max || n < 0 {
		if n < 4 {
			return nil, fmt.Errorf("%w: frame length %d", ErrMalformed, n)
		}
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, max)
	}
	const chunk = 64 << 10
	if cap(buf) >= n {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, unexpected(err)
		}
		return buf, nil
	}
	buf = make([]byte, 0, min(n, chunk))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(n, 2*cap(buf)))
			copy(nb, buf)
			buf = nb
		}
		k, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err != nil {
			return nil, unexpected(err)
		}
	}
	return buf, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// decodeBinaryHeader decodes RocketMQ's binary header layout.
func decodeBinaryHeader(h []byte) (*Command, error) {
	bad := func(what string) (*Command, error) {
		return nil, fmt.Errorf("%w: binary header: %s", ErrMalformed, what)
	}
	if len(h) < 2+1+2+4+4+4 {
		return bad("too short")
	}
	c := &Command{Ext: map[string]string{}}
	c.Code = int32(int16(binary.BigEndian.Uint16(h)))
	if lang := int(h[2]); lang < len(languages) {
		c.Language = languages[lang]
	} else {
		c.Language = "OTHER"
	}
	c.Version = int32(int16(binary.BigEndian.Uint16(h[3:])))
	c.Opaque = int32(binary.BigEndian.Uint32(h[5:]))
	c.Flag = int32(binary.BigEndian.Uint32(h[9:]))
	h = h[13:]
	rl := int(int32(binary.BigEndian.Uint32(h)))
	h = h[4:]
	if rl < 0 || rl > len(h) {
		return bad("remark length")
	}
	c.Remark = string(h[:rl])
	h = h[rl:]
	if len(h) < 4 {
		return bad("no ext length")
	}
	el := int(int32(binary.BigEndian.Uint32(h)))
	h = h[4:]
	if el < 0 || el > len(h) {
		return bad("ext length")
	}
	ext := h[:el]
	for len(ext) > 0 {
		if len(ext) < 2 {
			return bad("ext key length")
		}
		kl := int(binary.BigEndian.Uint16(ext))
		ext = ext[2:]
		if kl > len(ext) {
			return bad("ext key")
		}
		k := string(ext[:kl])
		ext = ext[kl:]
		if len(ext) < 4 {
			return bad("ext value length")
		}
		vl := int(int32(binary.BigEndian.Uint32(ext)))
		ext = ext[4:]
		if vl < 0 || vl > len(ext) {
			return bad("ext value")
		}
		c.Ext[k] = string(ext[:vl])
		ext = ext[vl:]
	}
	return c, nil
}
