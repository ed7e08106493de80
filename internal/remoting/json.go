package remoting

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds the nesting of ignored header values.
const maxDepth = 32

// decodeJSONHeader decodes a JSON header. It reads the keys RocketMQ writes
// and skips any others; on an error after the opaque was read, the partial
// command is returned with the error so that the caller can answer it.
func decodeJSONHeader(h []byte) (*Command, error) {
	s := scanner{b: h, src: string(h)} // values are substrings of src: one allocation
	c := &Command{Ext: make(map[string]string, 16)}
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "code":
			v, err := s.int32Value()
			c.Code = v
			return err
		case "version":
			v, err := s.int32Value()
			c.Version = v
			return err
		case "opaque":
			v, err := s.int32Value()
			c.Opaque = v
			return err
		case "flag":
			v, err := s.int32Value()
			c.Flag = v
			return err
		case "language":
			v, _, err := s.stringOrNull()
			c.Language = v
			return err
		case "remark":
			v, _, err := s.stringOrNull()
			c.Remark = v
			return err
		case "extFields":
			if s.null() {
				return nil
			}
			return s.object(func(k []byte) error {
				name, ok := knownFields[string(k)] // no allocation for the usual names
				if !ok {
					name = string(k)
				}
				v, ok, err := s.scalarText()
				if ok {
					c.Ext[name] = v
				}
				return err
			})
		default:
			return s.skip(0)
		}
	})
	if err == nil {
		s.ws()
		if s.i != len(s.b) {
			err = s.errorf("trailing bytes")
		}
	}
	if err != nil {
		return c, fmt.Errorf("%w: JSON header: %v", ErrMalformed, err)
	}
	return c, nil
}

// knownFields interns the header field names clients send most, so that
// decoding them allocates nothing.
var knownFields = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{
		"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
		"bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "batch", "maxReconsumeTimes",
		"bname", "consumerGroup", "queueOffset", "maxMsgNums", "commitOffset", "suspendTimeoutMillis",
		"subscription", "subVersion", "expressionType", "offset", "group", "delayLevel", "originMsgId",
		"originTopic", "msgId", "transactionId", "commitLogOffset", "tranStateTableOffset",
		"commitOrRollback", "fromTransactionCheck", "timestamp", "key", "maxNum", "beginTimestamp",
		"endTimestamp", "clusterName", "brokerName", "clientId", "maxMsgBytes",
		"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "z",
	} {
		m[k] = k
	}
	return m
}()

type scanner struct {
	b   []byte
	src string // b as a string, when values are to share it
	i   int
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", s.i, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) expect(ch byte) error {
	if s.peek() != ch {
		return s.errorf("want %q", ch)
	}
	s.i++
	return nil
}

// object reads {"key": value, ...}, calling field with each key; field
// must consume the value.
func (s *scanner) object(field func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.errorf("want a key")
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errorf("want , or }")
		}
	}
}

func (s *scanner) null() bool {
	if s.peek() == 'n' && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

func (s *scanner) stringOrNull() (string, bool, error) {
	if s.null() {
		return "", false, nil
	}
	if s.peek() != '"' {
		return "", false, s.errorf("want a string")
	}
	v, err := s.str()
	return string(v), true, err
}

// scalarText reads a string, number, boolean or null as text; null is
// reported absent.
func (s *scanner) scalarText() (string, bool, error) {
	switch c := s.peek(); {
	case c == '"':
		start := s.i + 1
		v, err := s.str()
		if err == nil && s.src != "" && s.i-1-start == len(v) { // no escapes: share src
			return s.src[start : s.i-1], true, nil
		}
		return string(v), true, err
	case c == 'n':
		if s.null() {
			return "", false, nil
		}
	case c == 't' || c == 'f':
		for _, lit := range []string{"true", "false"} {
			if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
				s.i += len(lit)
				return lit, true, nil
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		tok := s.number()
		return string(tok), true, nil
	}
	return "", false, s.errorf("want a scalar value")
}

func (s *scanner) number() []byte {
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			s.i++
		default:
			return s.b[start:s.i]
		}
	}
	return s.b[start:s.i]
}

func (s *scanner) int32Value() (int32, error) {
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		return 0, s.errorf("want a number")
	}
	tok := s.number()
	v, err := strconv.ParseInt(string(tok), 10, 32)
	if err != nil {
		return 0, s.errorf("%q is not a 32-bit integer", tok)
	}
	return int32(v), nil
}

// str reads a quoted string (s.b[s.i] is '"'). Without escapes the result
// aliases the input.
func (s *scanner) str() ([]byte, error) {
	s.i++ // opening quote
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, nil
		case c == '\\':
			return s.strEscaped(start)
		case c < 0x20:
			return nil, s.errorf("control character in a string")
		default:
			s.i++
		}
	}
	return nil, s.errorf("unterminated string")
}

func (s *scanner) strEscaped(start int) ([]byte, error) {
	out := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return out, nil
		case c < 0x20:
			return nil, s.errorf("control character in a string")
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			break
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, s.errorf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					s.i += 2
					if v, ok := s.hex4(); ok {
						r2 = v
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, s.errorf("bad escape \\%c", e)
		}
	}
	return nil, s.errorf("unterminated string")
}

func (s *scanner) hex4() (rune, bool) {
	if len(s.b)-s.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}

// skip consumes any JSON value.
func (s *scanner) skip(depth int) error {
	if depth > maxDepth {
		return s.errorf("nested too deep")
	}
	switch c := s.peek(); c {
	case '{':
		return s.object(func([]byte) error { return s.skip(depth + 1) })
	case '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return nil
			default:
				return s.errorf("want , or ]")
			}
		}
	default:
		_, _, err := s.scalarText()
		return err
	}
}
