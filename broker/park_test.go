package broker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/testutil"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// parkedAnswer is what a parked pull's done function was called with.
type parkedAnswer struct {
	res broker.PullResult
	err error
}

// pullOrPark calls PullOrPark and returns its immediate answer, or the
// parked pull and a channel that gets its one answer (it fails the test on
// a second).
func pullOrPark(t *testing.T, b *broker.Broker, req broker.PullRequest) (*broker.ParkedPull, <-chan parkedAnswer, broker.PullResult, error) {
	t.Helper()
	answers := make(chan parkedAnswer, 2)
	parked, res, err := b.PullOrPark(context.Background(), req, func(res broker.PullResult, err error) {
		answers <- parkedAnswer{res, err}
	})
	return parked, answers, res, err
}

// oneAnswer waits for a parked pull's answer and checks that no second
// one follows.
func oneAnswer(t *testing.T, answers <-chan parkedAnswer) parkedAnswer {
	t.Helper()
	var a parkedAnswer
	select {
	case a = <-answers:
	case <-time.After(10 * time.Second):
		t.Fatal("the parked pull was not answered within 10s")
	}
	select {
	case extra := <-answers:
		t.Fatalf("the parked pull was answered twice: %+v, then %+v", a, extra)
	case <-time.After(50 * time.Millisecond):
	}
	return a
}

// TestPullOrPark: a pull that finds messages, or asks for no hold, is
// answered at once; one that must wait is parked and answered once, by an
// arrival, by Cancel or by its group being stopped, and leaves its queue's
// parked set.
func TestPullOrPark(t *testing.T) {
	b := popBroker(t, "park", 1)
	hold := broker.PullRequest{Group: "g", Topic: "park", SuspendTimeout: time.Minute, CommitOffset: -1}

	noHold := hold
	noHold.SuspendTimeout = 0
	parked, _, res, err := pullOrPark(t, b.Broker, noHold)
	if err != nil || parked != nil || res.Status != broker.PullNoNewMessage {
		t.Fatalf("pull with no hold of an empty queue: %v, %v, parked %v; want NoNewMessage at once", res.Status, err, parked != nil)
	}

	// Parked, then answered by an arrival.
	parked, answers, _, err := pullOrPark(t, b.Broker, hold)
	if err != nil || parked == nil {
		t.Fatalf("pull of an empty queue: %v, parked %v; want it parked", err, parked != nil)
	}
	if n := b.ParkedCount("park", 0); n != 1 {
		t.Fatalf("%d pulls parked on the queue, want 1", n)
	}
	sendN(t, b, "park", 1, "m", 1, "")
	a := oneAnswer(t, answers)
	if a.err != nil || a.res.Status != broker.PullFound || len(a.res.Records) != 1 || a.res.NextOffset != 1 {
		t.Fatalf("parked pull after an arrival: %v, %d records, next %d, %v; want 1 record, next 1", a.res.Status, len(a.res.Records), a.res.NextOffset, a.err)
	}
	parked.Cancel() // after its answer: nothing
	if n := b.ParkedCount("park", 0); n != 0 {
		t.Fatalf("%d pulls parked after the answer, want 0", n)
	}

	// A pull that finds a message is not parked.
	found := hold
	parked, _, res, err = pullOrPark(t, b.Broker, found)
	if err != nil || parked != nil || res.Status != broker.PullFound || len(res.Records) != 1 {
		t.Fatalf("pull of a queue holding a message: %v, %d records, %v, parked %v", res.Status, len(res.Records), err, parked != nil)
	}

	// Cancelled: it answers what there is (nothing new), once.
	from1 := hold
	from1.Offset = 1
	parked, answers, _, _ = pullOrPark(t, b.Broker, from1)
	if parked == nil {
		t.Fatal("pull at the queue's end was not parked")
	}
	parked.Cancel()
	parked.Cancel()
	a = oneAnswer(t, answers)
	if a.err != nil || a.res.Status != broker.PullNoNewMessage || a.res.NextOffset != 1 {
		t.Fatalf("cancelled parked pull: %v, next %d, %v; want NoNewMessage, next 1", a.res.Status, a.res.NextOffset, a.err)
	}

	// Its hold ends: the same answer, from its timer.
	short := from1
	short.SuspendTimeout = 100 * time.Millisecond
	parked, answers, _, _ = pullOrPark(t, b.Broker, short)
	if parked == nil {
		t.Fatal("pull with a short hold was not parked")
	}
	if a = oneAnswer(t, answers); a.err != nil || a.res.Status != broker.PullNoNewMessage {
		t.Fatalf("parked pull at the end of its hold: %v, %v", a.res.Status, a.err)
	}

	// Its group is stopped while it is parked: the next arrival answers
	// the refusal.
	parked, answers, _, _ = pullOrPark(t, b.Broker, from1)
	if parked == nil {
		t.Fatal("pull at the queue's end was not parked")
	}
	setConsumeEnable(t, b, "g", false)
	sendN(t, b, "park", 1, "late", 1, "")
	a = oneAnswer(t, answers)
	wantErrCode(t, "parked pull of a group stopped meanwhile ("+strconv.Itoa(len(a.res.Records))+" records)", a.err, errcode.NoPermission)
	if n := b.ParkedCount("park", 0); n != 0 {
		t.Fatalf("%d pulls parked at the end, want 0", n)
	}
}

// TestParkedPullsOverFrames: the frame front end parks long polls without a
// goroutine each; one arrival answers every pull parked on its queue (more
// of them than an arrival answers on its own goroutine); a filtered-out
// arrival leaves a pull parked; a cancelled call, a closed connection and
// the end of a hold each end theirs.
func TestParkedPullsOverFrames(t *testing.T) {
	srv, gc := testBroker(t)
	createTopic(t, gc, "fan", 1)
	fc := frameClient(t, srv.Addr())
	pull := func(ctx context.Context, c *frame.Client, group, tags string, offset, holdMs int64) (*pb.PullResponse, error) {
		resp := new(pb.PullResponse)
		err := c.Call(ctx, frame.MethodPull, &pb.PullRequest{Group: group, Topic: "fan", Offset: offset,
			TagExpression: tags, SuspendTimeoutMs: holdMs, CommitOffset: -1}, resp)
		return resp, err
	}
	waitParked := func(n int) {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d pulls parked", n), func() error {
			if got := srv.ParkedCount("fan", 0); got != n {
				return fmt.Errorf("%d parked", got)
			}
			return nil
		})
	}

	// Forty groups wait on the queue; no goroutine of the broker holds any.
	const groups = 40
	var wg sync.WaitGroup
	answers := make(chan string, groups)
	for i := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := pull(context.Background(), fc, fmt.Sprint("g", i), "*", 0, 60_000)
			switch {
			case err != nil:
				answers <- err.Error()
			case resp.PullStatus != pb.PullStatus_FOUND || len(resp.Records) != 1:
				answers <- fmt.Sprintf("%v with %d records", resp.PullStatus, len(resp.Records))
			default:
				answers <- ""
			}
		}()
	}
	waitParked(groups)
	if n := srv.ParkedPulls(); n != groups {
		t.Errorf("the broker counts %d parked pulls, want %d", n, groups)
	}
	stacks := make([]byte, 1<<22)
	stacks = stacks[:runtime.Stack(stacks, true)]
	if n := bytes.Count(stacks, []byte("broker.(*Broker).pull(")); n != 0 {
		t.Errorf("%d goroutines wait in Broker.pull while %d pulls are parked, want none", n, groups)
	}
	// The answers must come from the arrival, well before the holds end
	// (LongPollMax caps them at 30 s): a pull left parked would be
	// answered by its timer with the same message.
	frameSend(t, fc, msg("fan", 0, "one", "a", ""))
	timeout := time.After(10 * time.Second)
	for i := range groups {
		select {
		case a := <-answers:
			if a != "" {
				t.Fatalf("a parked pull after the arrival: %s", a)
			}
		case <-timeout:
			t.Fatalf("%d of %d parked pulls answered within 10s of the arrival", i, groups)
		}
	}
	wg.Wait()
	waitParked(0)
	if n := srv.ParkedPulls(); n != 0 {
		t.Errorf("the broker counts %d parked pulls after they were answered, want 0", n)
	}

	// A pull for tag b stays parked through an arrival of tag a, and the
	// arrival of tag b answers it with that message alone.
	tagged := make(chan *pb.PullResponse, 1)
	go func() {
		resp, err := pull(context.Background(), fc, "tags", "b", 1, 60_000)
		if err != nil {
			resp = nil
		}
		tagged <- resp
	}()
	waitParked(1)
	frameSend(t, fc, msg("fan", 0, "not for b", "a", ""))
	waitQueue(t, gc, "fan", 0, 2)
	select {
	case resp := <-tagged:
		t.Fatalf("the pull for tag b was answered by a message of tag a: %v", resp)
	case <-time.After(200 * time.Millisecond):
	}
	frameSend(t, fc, msg("fan", 0, "for b", "b", ""))
	select {
	case resp := <-tagged:
		if resp == nil || resp.PullStatus != pb.PullStatus_FOUND || len(resp.Records) != 1 || resp.NextOffset != 3 {
			t.Fatalf("the pull for tag b after its message: %v", resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pull for tag b was not answered by its message")
	}
	waitParked(0)

	// A call given up by its caller: the server ends the parked pull.
	ctx, cancel := context.WithCancel(context.Background())
	given := make(chan error, 1)
	go func() {
		_, err := pull(ctx, fc, "gives-up", "*", 3, 60_000)
		given <- err
	}()
	waitParked(1)
	cancel()
	if err := <-given; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull: %v, want context.Canceled", err)
	}
	waitParked(0)

	// A connection that closes: its parked pulls end.
	other := frame.NewClient(srv.Addr(), frame.Options{})
	closed := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := pull(context.Background(), other, "closes", "*", 3, 60_000)
			closed <- err
		}()
	}
	waitParked(3)
	_ = other.Close()
	for range 3 {
		if err := <-closed; err == nil {
			t.Fatal("a pull on a closed client returned no error")
		}
	}
	waitParked(0)

	// The end of its hold: nothing new.
	resp, err := pull(context.Background(), fc, "short", "*", 3, 100)
	if err != nil || resp.PullStatus != pb.PullStatus_NO_NEW_MESSAGE || resp.NextOffset != 3 {
		t.Fatalf("pull whose hold ended: %v, %v", resp, err)
	}
	waitParked(0)
}

// TestDeletedTopicForgetsItsWaiters: deleting a topic drops what waits on
// its queues (a parked pull, a pull held on a goroutine) from the broker's
// registry, after waking them; made again, the topic's new pulls are
// answered by its arrivals.
func TestDeletedTopicForgetsItsWaiters(t *testing.T) {
	b := popBroker(t, "gone", 2)
	hold := broker.PullRequest{Group: "g", Topic: "gone", SuspendTimeout: 20 * time.Second, CommitOffset: -1}
	parked, answers, _, err := pullOrPark(t, b.Broker, hold)
	if err != nil || parked == nil {
		t.Fatalf("pull of an empty queue: %v, parked %v; want it parked", err, parked != nil)
	}
	held := hold
	held.QueueID = 1
	heldDone := make(chan parkedAnswer, 1)
	go func() {
		res, err := b.Pull(context.Background(), held)
		heldDone <- parkedAnswer{res, err}
	}()
	testutil.Eventually(t, 10*time.Second, "the held pull waits", func() bool { return b.PullParked("gone", 1) })

	if err := b.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	for q := range int32(2) {
		if b.PullParked("gone", q) {
			t.Fatalf("queue %d of the deleted topic is still in the registry", q)
		}
	}
	// Both are answered at once that the topic is gone, not by the end
	// of their hold.
	if a := oneAnswer(t, answers); errcode.Of(a.err) != errcode.TopicNotExist {
		t.Fatalf("parked pull after the delete: %v, %v; want TopicNotExist", a.res.Status, a.err)
	}
	select {
	case a := <-heldDone:
		if errcode.Of(a.err) != errcode.TopicNotExist {
			t.Fatalf("held pull after the delete: %v, %v; want TopicNotExist", a.res.Status, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held pull was not answered within 10s of the delete (its hold is 20s)")
	}

	if err := b.CreateTopic(broker.TopicConfig{Name: "gone", ReadQueueNums: 2, WriteQueueNums: 2, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	hold.SuspendTimeout = time.Minute
	parked, answers, _, err = pullOrPark(t, b.Broker, hold)
	if err != nil || parked == nil {
		t.Fatalf("pull of the new topic's empty queue: %v, parked %v; want it parked", err, parked != nil)
	}
	sendN(t, b, "gone", 1, "again", 1, "")
	if a := oneAnswer(t, answers); a.err != nil || a.res.Status != broker.PullFound {
		t.Fatalf("parked pull of the new topic: %v, %v; want the message", a.res.Status, a.err)
	}
}
