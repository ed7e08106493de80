package broker

import (
	"strings"
	"sync"
	"unsafe"

	"github.com/bolide-mq/bolide/broker/filter"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// Expression types of a subscription (RocketMQ's ExpressionType).
const (
	// ExprTag filters by tag: "*", "a || b".
	ExprTag = "TAG"
	// ExprSQL92 filters by an SQL92 condition over the message's
	// properties (package broker/filter), evaluated on the broker.
	ExprSQL92 = "SQL92"
)

// NormalizeExpressionType returns ExprTag or ExprSQL92 for a type named in
// any letter case ("" is a tag expression), or an error naming the type.
func NormalizeExpressionType(t string) (string, error) {
	switch strings.ToUpper(t) {
	case "", ExprTag:
		return ExprTag, nil
	case ExprSQL92, "SQL":
		return ExprSQL92, nil
	}
	return "", errcode.Errorf(errcode.SubscriptionParseFailed, "expression type %q is not supported: TAG or SQL92", t)
}

// messageFilter is a parsed subscription: a tag-code prefilter on the
// ConsumeQueue and, for SQL92, a condition evaluated on each record.
type messageFilter struct {
	tagCode func(int64) bool      // nil: every tag
	match   func(rec []byte) bool // nil: no condition on the record
}

// exprCache holds parsed subscription expressions by text, SQL92
// conditions and tag expressions alike: a subscription is parsed once, not
// on every pull. What it holds is read-only once parsed, so pulls share it.
type exprCache[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// sqlCache and tagCache are the broker's two caches.
type (
	sqlCache = exprCache[*filter.Expression]
	tagCache = exprCache[*message.TagExpression]
)

// maxCachedExprs bounds a cache; past it, it starts again empty.
const maxCachedExprs = 4096

// get returns expr parsed, parsing it only if the cache does not hold it.
// Expressions that fail to parse are not kept.
func (c *exprCache[T]) get(expr string, parse func(string) (T, error)) (T, error) {
	c.mu.Lock()
	e, ok := c.m[expr]
	c.mu.Unlock()
	if ok {
		return e, nil
	}
	e, err := parse(expr)
	if err != nil {
		return e, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedExprs {
		c.m = make(map[string]T)
	}
	c.m[expr] = e
	c.mu.Unlock()
	return e, nil
}

// CheckFilter validates a subscription as a consumer declares it: a tag
// expression, or an SQL92 condition (refused, with the position of the
// error, when it does not parse, and refused altogether when the broker's
// EnablePropertyFilter is off).
func (b *Broker) CheckFilter(exprType, expr string) error {
	_, err := b.compileFilter(exprType, expr)
	return err
}

// compileFilter parses a subscription into a messageFilter.
func (b *Broker) compileFilter(exprType, expr string) (messageFilter, error) {
	t, err := NormalizeExpressionType(exprType)
	if err != nil {
		return messageFilter{}, err
	}
	if t == ExprTag {
		te, err := b.tagExprs.get(expr, message.ParseTagExpression)
		if err != nil {
			return messageFilter{}, errcode.Errorf(errcode.SubscriptionParseFailed, "%v", err)
		}
		return messageFilter{tagCode: te.CodeFilter()}, nil
	}
	if !b.opts.EnablePropertyFilter {
		return messageFilter{}, errcode.Errorf(errcode.NoPermission,
			"broker %s does not filter by SQL92 (enable-property-filter is off)", b.opts.BrokerName)
	}
	e, err := b.sqls.get(expr, filter.Compile)
	if err != nil {
		return messageFilter{}, errcode.Errorf(errcode.SubscriptionParseFailed, "SQL92 filter %q: %v", expr, err)
	}
	return messageFilter{match: func(rec []byte) bool { return matchRecord(e, rec) }}, nil
}

// matchRecord evaluates an SQL92 condition on a stored record's
// properties (TAGS is the tag, as RocketMQ keeps it). A record whose
// properties cannot be read does not match.
func matchRecord(e *filter.Expression, rec []byte) bool {
	props, err := message.RecordProperties(rec)
	if err != nil {
		return false
	}
	return e.Evaluate(func(key string) (string, bool) {
		v, ok := message.LookupProperty(props, key)
		if !ok {
			return "", false
		}
		// The value is only read during Evaluate, while rec is alive:
		// no copy.
		return unsafe.String(unsafe.SliceData(v), len(v)), true
	})
}

// validSubscription checks a subscription's filter as a heartbeat carries
// it (whether the broker evaluates SQL92 at all is checked when the group
// pulls).
func validSubscription(sub Subscription) error {
	t, err := NormalizeExpressionType(sub.Type)
	if err != nil {
		return err
	}
	if t == ExprTag {
		if _, err := message.ParseTagExpression(sub.Expression); err != nil {
			return errcode.Errorf(errcode.SubscriptionParseFailed, "%v", err)
		}
		return nil
	}
	if _, err := filter.Parse(sub.Expression); err != nil {
		return errcode.Errorf(errcode.SubscriptionParseFailed, "SQL92 filter %q of %s: %v", sub.Expression, sub.Topic, err)
	}
	return nil
}
