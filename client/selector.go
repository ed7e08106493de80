package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Expression types of a Selector, as the brokers name them.
const (
	exprTag   = "TAG"
	exprSQL92 = "SQL92"
)

// Selector chooses which messages of a topic a subscription receives: by
// tag (ByTag) or by an SQL92 condition over the messages' properties
// (SQL92), as RocketMQ's MessageSelector. The zero Selector takes every
// message.
type Selector struct {
	sql  bool
	expr string
}

// ByTag selects by a tag expression: "*" or "" for all, or "a || b".
func ByTag(expression string) Selector { return Selector{expr: expression} }

// SQL92 selects the messages for which an SQL92 condition over their
// properties holds, e.g. "region = 'eu' AND amount > 100 AND kind IN
// ('a','b')"; TAGS is the message's tag. The brokers evaluate it, so
// messages that do not match never reach the client, and the consumer's
// offsets move past them. The language is RocketMQ's (a property that is
// missing or of the wrong type makes a comparison false; see the broker's
// filter package for the grammar). Brokers started with
// --enable-property-filter=false refuse it.
func SQL92(condition string) Selector { return Selector{sql: true, expr: condition} }

// IsSQL92 reports whether the selector is an SQL92 condition.
func (s Selector) IsSQL92() bool { return s.sql }

// Expression returns the tag expression or the SQL92 condition.
func (s Selector) Expression() string { return s.expr }

// String returns the selector as "TAG(expression)" or "SQL92(condition)".
func (s Selector) String() string {
	if s.sql {
		return exprSQL92 + "(" + s.expr + ")"
	}
	return exprTag + "(" + s.expr + ")"
}

// exprType is the selector's expression type on the wire.
func (s Selector) exprType() string {
	if s.sql {
		return exprSQL92
	}
	return ""
}

// checkSQL asks the brokers of topic whether they take an SQL92 condition:
// the language is the broker's (the SDK does not parse it), and a broker
// may not filter by properties at all. It returns the first refusal
// (SUBSCRIPTION_PARSE_FAILED with the position of the error, or
// NO_PERMISSION). Not being able to ask (no route yet, no broker
// answering) is not an error: the condition is checked again when the
// consumer starts (a broker that refuses it then refuses the consumer's
// sessions).
func (c *consumerCore) checkSQL(ctx context.Context, topic, cond string) error {
	if strings.TrimSpace(cond) == "" {
		return codeErr(pb.Code_SUBSCRIPTION_PARSE_FAILED, "empty SQL92 condition for %s", topic)
	}
	ri, err := c.routes.get(ctx, topic)
	if err != nil {
		c.log.Debug("SQL92 condition not checked: no route", zap.String("topic", topic), zap.Error(err))
		return nil
	}
	for _, bd := range ri.route.Brokers {
		addr := bd.ReadAddr()
		if addr == "" {
			continue
		}
		err := c.checkSQLAt(ctx, addr, topic, cond)
		switch {
		case err == nil:
		case refusedSubscription(err):
			return fmt.Errorf("SQL92 condition of %s refused by %s: %w", topic, bd.BrokerName, err)
		default:
			c.log.Debug("SQL92 condition not checked", zap.String("broker", addr), zap.Error(err))
		}
	}
	return nil
}

func (c *consumerCore) checkSQLAt(ctx context.Context, addr, topic, cond string) error {
	cli, err := c.broker(addr)
	if err != nil {
		return err
	}
	rctx, cancel := c.rpcContext(ctx)
	defer cancel()
	resp, err := cli.CheckSubscription(rctx, &pb.CheckSubscriptionRequest{Group: c.group,
		Subscription: &pb.Subscription{Topic: topic, Expression: cond, ExpressionType: exprSQL92}})
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	return err
}

// checkSQLSubscriptions checks every SQL92 subscription with the brokers
// (Start: the routes are readable by then or the consumer cannot run).
func (c *consumerCore) checkSQLSubscriptions(ctx context.Context) error {
	for _, t := range c.topics() {
		if s := c.subscription(t); s != nil && s.sel.sql {
			if err := c.checkSQL(ctx, t, s.sel.expr); err != nil {
				return err
			}
		}
	}
	return nil
}

// refusedSubscription reports whether a broker refused a subscription.
func refusedSubscription(err error) bool {
	return errors.Is(err, wire.ErrSubscriptionParse) || errors.Is(err, wire.ErrNoPermission)
}
