package client

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// TestAdminBrowseQueue: a queue is read page by page in queue order, each
// page ending where the next starts; the queue's end gives nothing and
// keeps the offset; past the end is a coded not-found error.
func TestAdminBrowseQueue(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(1)
	ctx := context.Background()
	a := e.admin
	results := e.sendN(e.producer(), topic, 10, func(i int) *Message {
		return &Message{Topic: topic, Tag: fmt.Sprint("t", i), Body: []byte(fmt.Sprint("body ", i))}
	})
	mq := results[0].Queue(topic)
	testutil.WaitFor(t, 10*time.Second, "the last message in the queue", func() error {
		_, err := a.ViewMessageAt(ctx, mq, 9)
		return err
	})
	var got []*MessageExt
	from := int64(0)
	for _, size := range []int{4, 4, 4} {
		page, next, err := a.BrowseQueue(ctx, mq, from, size)
		if err != nil {
			t.Fatalf("browse %s from %d: %v", mq, from, err)
		}
		if want := min(int64(size), 10-from); int64(len(page)) != want || next != from+want {
			t.Fatalf("browse from %d max %d: %d messages, next %d; want %d", from, size, len(page), next, want)
		}
		got = append(got, page...)
		from = next
	}
	if len(got) != 10 {
		t.Fatalf("%d messages, want 10", len(got))
	}
	for i, m := range got {
		if m.QueueOffset != int64(i) || m.MsgID != results[i].MsgID || string(m.Body) != fmt.Sprint("body ", i) || m.Tag != fmt.Sprint("t", i) {
			t.Fatalf("message %d: %s at offset %d body %q, want %s", i, m.MsgID, m.QueueOffset, m.Body, results[i].MsgID)
		}
	}
	// The end of the queue: nothing, and the offset stays.
	if page, next, err := a.BrowseQueue(ctx, mq, 10, 5); err != nil || len(page) != 0 || next != 10 {
		t.Fatalf("browse at the end: %d messages, next %d, %v", len(page), next, err)
	}
	// A default page holds everything here.
	if page, next, err := a.BrowseQueue(ctx, mq, 3, 0); err != nil || len(page) != 7 || next != 10 || page[0].QueueOffset != 3 {
		t.Fatalf("browse from 3 with the default max: %d messages, next %d, %v", len(page), next, err)
	}
	_, _, err := a.BrowseQueue(ctx, mq, 12, 5)
	if !errors.Is(err, ErrQueryNotFound) || !strings.Contains(err.Error(), "its offsets are 0..9") {
		t.Fatalf("browse past the end: %v", err)
	}
	for _, c := range []struct {
		mq   MessageQueue
		from int64
		want error
	}{
		{mq, -1, ErrInvalidParameter},
		{MessageQueue{Topic: topic, BrokerName: "broker-z"}, 0, ErrBrokerNotExist},
		{MessageQueue{Topic: topic, BrokerName: mq.BrokerName, QueueID: 3}, 0, ErrInvalidParameter},
		{MessageQueue{Topic: "no-such-topic", BrokerName: mq.BrokerName}, 0, ErrTopicNotExist},
	} {
		if _, _, err := a.BrowseQueue(ctx, c.mq, c.from, 1); !errors.Is(err, c.want) {
			t.Fatalf("browse %s from %d: %v, want %v", c.mq, c.from, err, c.want)
		}
	}
}

// storeTimeOf returns the store time of a sent message, once queued.
func storeTimeOf(t *testing.T, a *Admin, topic string, r *SendResult) time.Time {
	t.Helper()
	var m *MessageExt
	testutil.WaitFor(t, 10*time.Second, "message "+r.MsgID, func() error {
		var err error
		m, err = a.ViewMessageAt(context.Background(), r.Queue(topic), r.QueueOffset)
		return err
	})
	return m.StoreTimestamp
}

// afterClock waits until the clock has passed t by a millisecond, so that
// what is stored next has a later store time.
func afterClock(t *testing.T, at time.Time) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, "the clock", func() error {
		if time.Since(at) <= time.Millisecond {
			return fmt.Errorf("still at %s", at)
		}
		return nil
	})
}

// TestAdminMessagesByTime: three batches sent one after the other over
// two broker groups; a time range that covers the middle batch returns
// exactly it, merged from every queue in store-time order; max keeps the
// oldest; an empty range and a reversed one are told apart.
func TestAdminMessagesByTime(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	ctx := context.Background()
	a := e.admin
	p := e.producer()
	var batches [3][]*SendResult
	var starts [4]time.Time
	for b := range batches {
		batches[b] = e.sendN(p, topic, 8, func(i int) *Message {
			return &Message{Topic: topic, Keys: []string{fmt.Sprintf("b%d-%d", b, i)}, Body: []byte(fmt.Sprintf("batch %d message %d", b, i))}
		})
		last := batches[b][0]
		starts[b] = storeTimeOf(t, a, topic, last)
		for _, r := range batches[b] {
			st := storeTimeOf(t, a, topic, r)
			if st.Before(starts[b]) {
				starts[b] = st
			}
			if st.After(starts[b+1]) {
				starts[b+1] = st
			}
		}
		afterClock(t, starts[b+1])
		starts[b+1] = starts[b+1].Add(time.Millisecond) // the end of batch b, exclusive
	}
	brokers := map[string]bool{}
	for _, r := range batches[1] {
		brokers[r.BrokerName] = true
	}
	if len(brokers) != 2 {
		t.Fatalf("batch 1 went to %v only; the test wants both broker groups", brokers)
	}
	// [start of batch 1, end of batch 1): batch 1, all of it.
	got, err := a.MessagesByTime(ctx, topic, starts[1], starts[2], 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, m := range got {
		ids = append(ids, m.MsgID)
		if i > 0 && m.StoreTimestamp.Before(got[i-1].StoreTimestamp) {
			t.Fatalf("message %d stored at %s after one stored at %s", i, m.StoreTimestamp, got[i-1].StoreTimestamp)
		}
		if !strings.HasPrefix(string(m.Body), "batch 1 ") {
			t.Fatalf("message %d of the range: %q", i, m.Body)
		}
	}
	var want []string
	for _, r := range batches[1] {
		want = append(want, r.MsgID)
	}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("range of batch 1: %v, want %v", ids, want)
	}
	// From batch 1 on, capped at 3: the 3 oldest of batch 1.
	capped, err := a.MessagesByTime(ctx, topic, starts[1], time.Time{}, 3)
	if err != nil || len(capped) != 3 {
		t.Fatalf("capped at 3: %d messages, %v", len(capped), err)
	}
	for i, m := range capped {
		if m.StoreTimestamp.After(got[2].StoreTimestamp) {
			t.Fatalf("capped message %d stored at %s, after the third of the range (%s)", i, m.StoreTimestamp, got[2].StoreTimestamp)
		}
	}
	// No bounds: everything.
	if all, err := a.MessagesByTime(ctx, topic, time.Time{}, time.Time{}, 100); err != nil || len(all) != 24 {
		t.Fatalf("no bounds: %d messages, %v", len(all), err)
	}
	// After the last batch: nothing, not an error.
	if none, err := a.MessagesByTime(ctx, topic, starts[3], time.Time{}, 100); err != nil || len(none) != 0 {
		t.Fatalf("after the last batch: %d messages, %v", len(none), err)
	}
	if _, err := a.MessagesByTime(ctx, topic, starts[2], starts[1], 10); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("reversed range: %v", err)
	}
	if _, err := a.MessagesByTime(ctx, "no-such-topic", starts[1], starts[2], 10); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("unknown topic: %v", err)
	}
}

// TestAdminTraceMessage: a consumer fails a message until it is a dead
// letter; its trace, from any id of any copy, is the origin, both retry
// copies and the dead letter, in store order with growing reconsume
// counts.
func TestAdminTraceMessage(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(1)
	const group = "trace-g"
	ctx := context.Background()
	a := e.admin
	p := e.producer()
	r := e.sendN(p, topic, 2, func(i int) *Message {
		return &Message{Topic: topic, Tag: "paid", Keys: []string{fmt.Sprint("order-", i)}, Body: []byte(fmt.Sprint("order ", i))}
	})
	doomed, fine := r[0], r[1]
	e.push(group, topic, "*", ErrorListener(func(ctx context.Context, msgs []*MessageExt) error {
		for _, m := range msgs {
			if m.MsgID == doomed.MsgID {
				SetRetryDelayLevel(ctx, 1) // 1 s
				return errors.New("bad order")
			}
		}
		return nil
	}), WithMaxReconsumeTimes(2), WithConsumeFrom(ConsumeFromFirst))
	e.waitFor(60*time.Second, "the dead letter", func() error {
		dls, err := a.DeadLetters(ctx, group, DeadLetterQuery{})
		if err != nil {
			return err
		}
		if len(dls) != 1 {
			return fmt.Errorf("%d dead letters", len(dls))
		}
		return nil
	})

	tr, err := a.TraceMessage(ctx, doomed.MsgID, "")
	if err != nil {
		t.Fatal(err)
	}
	checkTrace(t, tr, topic, group, doomed)

	// By the origin's offset msg id, and by the dead letter's offset msg id
	// within its topic: the same trace.
	tr2, err := a.TraceMessage(ctx, doomed.OffsetMsgID, "")
	if err != nil {
		t.Fatal(err)
	}
	checkTrace(t, tr2, topic, group, doomed)
	dlq := tr.Hops[len(tr.Hops)-1]
	tr3, err := a.TraceMessage(ctx, dlq.MsgID, "%DLQ%"+group)
	if err != nil {
		t.Fatal(err)
	}
	checkTrace(t, tr3, topic, group, doomed)
	tr4, err := a.TraceMessage(ctx, doomed.MsgID, "%DLQ%"+group)
	if err != nil {
		t.Fatal(err)
	}
	checkTrace(t, tr4, topic, group, doomed)

	// A message consumed at once has its origin only.
	ok, err := a.TraceMessage(ctx, fine.MsgID, topic)
	if err != nil || len(ok.Hops) != 1 || ok.Hops[0].Kind != HopOrigin || ok.Hops[0].MsgID != fine.OffsetMsgID {
		t.Fatalf("trace of a consumed message: %+v, %v", ok, err)
	}
	if _, err := a.TraceMessage(ctx, "0123456789ABCDEF0123456789ABCDEF", topic); !errors.Is(err, ErrQueryNotFound) {
		t.Fatalf("trace of an unknown id: %v", err)
	}
}

func checkTrace(t *testing.T, tr *MessageTrace, topic, group string, sent *SendResult) {
	t.Helper()
	if tr.Message.Topic != topic || tr.Message.MsgID != sent.MsgID || tr.Message.OffsetMsgID != sent.OffsetMsgID {
		t.Fatalf("traced message %s (%s) in %s, want %s (%s) in %s", tr.Message.MsgID, tr.Message.OffsetMsgID,
			tr.Message.Topic, sent.MsgID, sent.OffsetMsgID, topic)
	}
	want := []struct {
		kind, topic, group string
		times              int32
	}{
		{HopOrigin, topic, "", 0},
		{HopRetry, "%RETRY%" + group, group, 1},
		{HopRetry, "%RETRY%" + group, group, 2},
		{HopDLQ, "%DLQ%" + group, group, 3},
	}
	var desc []string
	for _, h := range tr.Hops {
		desc = append(desc, fmt.Sprintf("%s %s %s #%d %s", h.Kind, h.Topic, h.Group, h.ReconsumeTimes, h.StoreTime.Format(time.RFC3339Nano)))
	}
	if len(tr.Hops) != len(want) {
		t.Fatalf("hops:\n%s", strings.Join(desc, "\n"))
	}
	seen := map[string]bool{}
	for i, h := range tr.Hops {
		w := want[i]
		if h.Kind != w.kind || h.Topic != w.topic || h.Group != w.group || h.ReconsumeTimes != w.times || h.BrokerName != "broker-a" ||
			h.MsgID == "" || seen[h.MsgID] || h.StoreTime.IsZero() || i > 0 && h.StoreTime.Before(tr.Hops[i-1].StoreTime) {
			t.Fatalf("hop %d: %+v; hops:\n%s", i, h, strings.Join(desc, "\n"))
		}
		seen[h.MsgID] = true
	}
	if tr.Hops[0].MsgID != sent.OffsetMsgID || tr.Hops[0].QueueOffset != sent.QueueOffset {
		t.Fatalf("origin hop %+v, sent %+v", tr.Hops[0], sent)
	}
}

// With ACL on, BrowseQueue and MessagesByTime need what ViewMessageAt
// needs — a pull without a group commits nothing, so SUB on the topic and
// no group permission: a reader with SUB on acl-orders and no group
// permission at all reads it and is refused acl-other with NO_PERMISSION,
// as ViewMessageAt refuses it.
func TestACLBrowse(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: "admin-key", SecretKey: "admin-secret", Admin: true},
		{AccessKey: "reader", SecretKey: "reader-secret", TopicPerms: []string{"acl-orders=SUB"}},
	}}); err != nil {
		t.Fatal(err)
	}
	e := startEnvWith(t, cluster.Options{Broker: func(o *broker.Options) {
		o.Auth = auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}
		o.Credentials = auth.Credentials{AccessKey: "admin-key", SecretKey: "admin-secret"}
	}})
	admin, err := NewAdmin(e.shared(), WithCredentials("admin-key", "admin-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	reader, err := NewAdmin(e.shared(), WithCredentials("reader", "reader-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	ctx := context.Background()
	p := e.producer(WithCredentials("admin-key", "admin-secret"))
	topics := []string{"acl-orders", "acl-other"}
	var sent []*SendResult
	for _, topic := range topics {
		if err := admin.CreateTopic(ctx, TopicSpec{Name: topic, Queues: 1}); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, e.sendN(p, topic, 1, func(int) *Message { return &Message{Topic: topic, Body: []byte("to " + topic)} })...)
	}
	for i, topic := range topics {
		mq := sent[i].Queue(topic)
		e.waitFor(10*time.Second, "the message in "+topic, func() error {
			_, err := admin.ViewMessageAt(ctx, mq, sent[i].QueueOffset)
			return err
		})
		_, viewErr := reader.ViewMessageAt(ctx, mq, sent[i].QueueOffset)
		msgs, _, browseErr := reader.BrowseQueue(ctx, mq, 0, 10)
		byTime, timeErr := reader.MessagesByTime(ctx, topic, time.Time{}, time.Time{}, 10)
		if topic == "acl-orders" {
			if viewErr != nil || browseErr != nil || timeErr != nil || len(msgs) != 1 || len(byTime) != 1 || string(msgs[0].Body) != "to acl-orders" {
				t.Fatalf("the reader reads %s: view %v, browse %d %v, by time %d %v", topic, viewErr, len(msgs), browseErr, len(byTime), timeErr)
			}
			continue
		}
		for name, err := range map[string]error{"view": viewErr, "browse": browseErr, "by time": timeErr} {
			if !errors.Is(err, ErrNoPermission) {
				t.Fatalf("the reader reads %s (%s): %v, want NO_PERMISSION", topic, name, err)
			}
		}
	}
}
