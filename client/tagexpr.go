package client

import (
	"sort"
	"strings"
	"unicode"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// tagFilter is a parsed tag expression: "*" (or "") for every message, or
// tags joined by "||".
type tagFilter struct {
	all  bool
	tags map[string]struct{}
	// expr is the normalised expression sent to brokers ("*" or
	// "a||b" in the order written, duplicates removed).
	expr string
}

// parseTagExpression parses a subscription's tag expression. Tags are
// trimmed of surrounding spaces; an empty tag ("a || || b"), a lone "|",
// a tag with inner white space, or "*" mixed with tags is an error
// matching ErrSubscriptionParse.
func parseTagExpression(expr string) (*tagFilter, error) {
	s := strings.TrimSpace(expr)
	if s == "" || s == "*" {
		return &tagFilter{all: true, expr: "*"}, nil
	}
	f := &tagFilter{tags: make(map[string]struct{})}
	var order []string
	for _, part := range strings.Split(s, "||") {
		tag := strings.TrimSpace(part)
		switch {
		case tag == "":
			return nil, codeErr(pb.Code_SUBSCRIPTION_PARSE_FAILED, "tag expression %q: empty tag", expr)
		case tag == "*":
			return nil, codeErr(pb.Code_SUBSCRIPTION_PARSE_FAILED, "tag expression %q: \"*\" cannot be combined with tags", expr)
		case strings.Contains(tag, "|"):
			return nil, codeErr(pb.Code_SUBSCRIPTION_PARSE_FAILED, "tag expression %q: tags are separated by \"||\", not \"|\"", expr)
		case strings.IndexFunc(tag, unicode.IsSpace) >= 0:
			return nil, codeErr(pb.Code_SUBSCRIPTION_PARSE_FAILED, "tag expression %q: tag %q contains white space", expr, tag)
		}
		if _, dup := f.tags[tag]; !dup {
			f.tags[tag] = struct{}{}
			order = append(order, tag)
		}
	}
	f.expr = strings.Join(order, "||")
	return f, nil
}

// match reports whether a message with this tag passes the filter. The
// broker filters by tag hash; this exact check removes hash collisions.
func (f *tagFilter) match(tag string) bool {
	if f.all {
		return true
	}
	_, ok := f.tags[tag]
	return ok
}

// tagList returns the filter's tags, sorted (nil for all).
func (f *tagFilter) tagList() []string {
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
