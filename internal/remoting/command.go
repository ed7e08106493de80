package remoting

import (
	"errors"
	"fmt"
	"strconv"
)

// Flag bits.
const (
	FlagResponse int32 = 1 // the frame answers a request
	FlagOneway   int32 = 2 // the request wants no answer
)

// Language is what this side writes in its headers.
const Language = "GO"

// ErrMissingField is wrapped by the field accessors for an absent field.
var ErrMissingField = errors.New("remoting: missing header field")

// Command is one frame: a request or a response.
type Command struct {
	Code     int32 // the request code, or the response code
	Language string
	Version  int32
	Opaque   int32 // pairs a response with its request
	Flag     int32 // FlagResponse, FlagOneway
	Remark   string
	Ext      map[string]string // the header fields; nil is written as {}
	Body     []byte
}

// NewRequest returns a request; the connection assigns its opaque.
func NewRequest(code int32, ext map[string]string, body []byte) *Command {
	if ext == nil {
		ext = map[string]string{}
	}
	return &Command{Code: code, Language: Language, Version: ServerVersion, Ext: ext, Body: body}
}

// IsResponse reports whether c answers a request.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether c is a request that wants no answer.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// Reply returns a response to c with code and remark and no fields.
func (c *Command) Reply(code int32, remark string) *Command {
	return &Command{Code: code, Language: Language, Version: ServerVersion, Opaque: c.Opaque,
		Flag: FlagResponse, Remark: remark, Ext: map[string]string{}}
}

// Set sets a header field and returns c.
func (c *Command) Set(key, value string) *Command {
	if c.Ext == nil {
		c.Ext = map[string]string{}
	}
	c.Ext[key] = value
	return c
}

// SetInt sets a header field to an integer and returns c.
func (c *Command) SetInt(key string, v int64) *Command {
	return c.Set(key, strconv.FormatInt(v, 10))
}

// String returns a header field, "" when absent.
func (c *Command) String(key string) string { return c.Ext[key] }

// Has reports whether a header field is present.
func (c *Command) Has(key string) bool {
	_, ok := c.Ext[key]
	return ok
}

// Int64 parses a required integer field.
func (c *Command) Int64(key string) (int64, error) {
	s, ok := c.Ext[key]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrMissingField, key)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("remoting: header field %q: %q is not an integer", key, s)
	}
	return v, nil
}

// Int32 parses a required 32-bit integer field.
func (c *Command) Int32(key string) (int32, error) {
	s, ok := c.Ext[key]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrMissingField, key)
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("remoting: header field %q: %q is not a 32-bit integer", key, s)
	}
	return int32(v), nil
}

// OptInt64 parses an optional integer field: def when absent or empty.
func (c *Command) OptInt64(key string, def int64) (int64, error) {
	if s, ok := c.Ext[key]; !ok || s == "" {
		return def, nil
	}
	return c.Int64(key)
}

// OptInt32 parses an optional 32-bit integer field: def when absent or empty.
func (c *Command) OptInt32(key string, def int32) (int32, error) {
	if s, ok := c.Ext[key]; !ok || s == "" {
		return def, nil
	}
	return c.Int32(key)
}

// Bool reports whether a field is "true" (any case).
func (c *Command) Bool(key string) bool {
	b, _ := strconv.ParseBool(c.Ext[key])
	return b
}

// Required returns a string field that must be present and non-empty.
func (c *Command) Required(key string) (string, error) {
	s := c.Ext[key]
	if s == "" {
		return "", fmt.Errorf("%w %q", ErrMissingField, key)
	}
	return s, nil
}
