package rocketmqgo_test

import (
	"context"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// txnListener decides by the message's "outcome" property; a check-back
// (only expected for "unknown") commits.
type txnListener struct {
	mu      sync.Mutex
	checked map[string][]*primitive.MessageExt // by UNIQ_KEY
}

func (l *txnListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch m.GetProperty("outcome") {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	default:
		return primitive.UnkonwnState
	}
}

func (l *txnListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	l.checked[m.MsgId] = append(l.checked[m.MsgId], m)
	l.mu.Unlock()
	if m.GetProperty("outcome") == "rollback" {
		return primitive.RollbackMessageState
	}
	return primitive.CommitMessageState
}

func (l *txnListener) checks(id string) []*primitive.MessageExt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checked[id]
}

func TestTransactions(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		topic := c.NewTopic(t, "txn", 2)
		col := &collector{}
		startPushConsumer(t, c, uniq("txng"), topic, "*", col.listener("push"))
		l := &txnListener{checked: map[string][]*primitive.MessageExt{}}
		// A unique instance name: the client routes a check-back only to the
		// first client object created for its clientID.
		tp, err := rocketmq.NewTransactionProducer(l,
			producer.WithNameServer([]string{c.NameSrv}),
			producer.WithGroupName(uniq("txnpg")),
			producer.WithInstanceName(uniq("txnp")),
			producer.WithRetry(2))
		if err != nil {
			t.Fatalf("new transaction producer: %v", err)
		}
		if err := tp.Start(); err != nil {
			t.Fatalf("start transaction producer: %v", err)
		}
		t.Cleanup(func() { _ = tp.Shutdown() })

		outcomes := []string{"commit", "rollback", "unknown", "commit", "rollback", "unknown"}
		want := map[string]primitive.LocalTransactionState{
			"commit": primitive.CommitMessageState, "rollback": primitive.RollbackMessageState, "unknown": primitive.UnkonwnState,
		}
		var ss []sent
		for i, o := range outcomes {
			m := testMessage(topic, i, "txn-"+o)
			m.WithProperty("outcome", o)
			res, err := tp.SendMessageInTransaction(context.Background(), m)
			if err != nil {
				t.Fatalf("SendMessageInTransaction (%s): %v", o, err)
			}
			if res.State != want[o] {
				t.Errorf("%s: state %v, want %v", o, res.State, want[o])
			}
			checkSendResult(t, c, m, res.SendResult)
			ss = append(ss, sent{m, res.SendResult})
		}
		// Committed at once, and unknown → check-back → commit.
		col.waitDistinct(t, 4, 30*time.Second)
		time.Sleep(txnTimeout + 2*txnCheckInterval) // a rolled-back message would show by now
		got := col.byMsgID()
		for _, s := range ss {
			o := s.msg.GetProperty("outcome")
			d := got[s.res.MsgID]
			checks := l.checks(s.res.MsgID)
			switch o {
			case "rollback":
				if len(d) != 0 {
					t.Errorf("rolled-back message %s consumed", s.res.MsgID)
				}
			default:
				if len(d) != 1 {
					t.Errorf("%s message %s consumed %d times", o, s.res.MsgID, len(d))
					continue
				}
				m := d[0].msg
				if m.Topic != topic || string(m.Body) != string(s.msg.Body) || m.GetTags() != s.msg.GetTags() || m.GetKeys() != s.msg.GetKeys() ||
					m.GetProperty("seq") != s.msg.GetProperty("seq") || m.GetProperty("color") != s.msg.GetProperty("color") {
					t.Errorf("%s message %s arrived as topic %q body %q tag %q keys %q", o, s.res.MsgID, m.Topic, m.Body, m.GetTags(), m.GetKeys())
				}
				if m.ReconsumeTimes != 0 {
					t.Errorf("%s message %s: ReconsumeTimes %d", o, s.res.MsgID, m.ReconsumeTimes)
				}
			}
			if o == "unknown" {
				if len(checks) == 0 {
					t.Errorf("unknown message %s was never checked back", s.res.MsgID)
				}
				for _, cm := range checks {
					if cm.Topic != topic || cm.GetProperty("seq") != s.msg.GetProperty("seq") || string(cm.Body) != string(s.msg.Body) {
						t.Errorf("check-back of %s carries topic %q seq %q body %q", s.res.MsgID, cm.Topic, cm.GetProperty("seq"), cm.Body)
					}
				}
			} else if len(checks) != 0 {
				t.Errorf("%s message %s was checked back %d times, though its outcome was sent", o, s.res.MsgID, len(checks))
			}
		}
	})
}
