package message

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// ErrBadTagExpression is wrapped by every error of ParseTagExpression.
var ErrBadTagExpression = errors.New("bad tag expression")

// TagExpression is a parsed subscription expression: "*" (or "") for every
// message, or tags joined by "||". Client and broker parse with this one
// grammar, so an expression one side accepts the other accepts too.
type TagExpression struct {
	all   bool
	tags  map[string]struct{}
	codes map[int64]struct{}
	// expr is the normalised text: "*", or the tags in the order written,
	// duplicates removed, joined by "||".
	expr string
}

// ParseTagExpression parses a tag expression. Tags are trimmed of
// surrounding white space; an empty tag ("a || || b"), a single "|", a tag
// with inner white space, or "*" mixed with tags is an error wrapping
// ErrBadTagExpression.
func ParseTagExpression(expr string) (*TagExpression, error) {
	s := strings.TrimSpace(expr)
	if s == "" || s == "*" {
		return &TagExpression{all: true, expr: "*"}, nil
	}
	f := &TagExpression{tags: make(map[string]struct{}), codes: make(map[int64]struct{})}
	var order []string
	for _, part := range strings.Split(s, "||") {
		tag := strings.TrimSpace(part)
		var why string
		switch {
		case tag == "":
			why = "empty tag"
		case tag == "*":
			why = `"*" cannot be combined with tags`
		case strings.Contains(tag, "|"):
			why = `tags are separated by "||", not "|"`
		case strings.IndexFunc(tag, unicode.IsSpace) >= 0:
			why = fmt.Sprintf("tag %q contains white space", tag)
		}
		if why != "" {
			return nil, fmt.Errorf("%w %q: %s", ErrBadTagExpression, expr, why)
		}
		if _, dup := f.tags[tag]; !dup {
			f.tags[tag] = struct{}{}
			f.codes[TagsHash(tag)] = struct{}{}
			order = append(order, tag)
		}
	}
	f.expr = strings.Join(order, "||")
	return f, nil
}

// All reports whether the expression takes every message.
func (f *TagExpression) All() bool { return f.all }

// String is the normalised expression.
func (f *TagExpression) String() string { return f.expr }

// Match reports whether a message with this tag passes (exact; the
// client's check after the broker's hash filter).
func (f *TagExpression) Match(tag string) bool {
	if f.all {
		return true
	}
	_, ok := f.tags[tag]
	return ok
}

// MatchCode reports whether a ConsumeQueue tag code passes (the broker's
// filter; hash collisions pass too).
func (f *TagExpression) MatchCode(code int64) bool {
	if f.all {
		return true
	}
	_, ok := f.codes[code]
	return ok
}

// CodeFilter returns MatchCode, or nil when every message passes (the
// store reads without a filter then).
func (f *TagExpression) CodeFilter() func(int64) bool {
	if f.all {
		return nil
	}
	return f.MatchCode
}

// Tags returns the tags, sorted (nil for every message).
func (f *TagExpression) Tags() []string {
	if f.all {
		return nil
	}
	out := make([]string, 0, len(f.tags))
	for t := range f.tags {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
