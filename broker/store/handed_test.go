package store

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/bolide-mq/bolide/message"
)

// TestPutHandsDispatch: the Dispatch a put hands the dispatcher in place of
// decoding its record is the one decoding the stored record gives, for
// messages with and without tags, keys, unique keys, delay and timer
// properties, IPv4 and IPv6 born hosts, and transactional flags; and the
// dispatcher does take them.
func TestPutHandsDispatch(t *testing.T) {
	var (
		mu         sync.Mutex
		handed     int
		mismatches []string
	)
	testHandedDispatch = func(d message.Dispatch, rec []byte) {
		want, err := message.DecodeDispatch(rec)
		mu.Lock()
		defer mu.Unlock()
		handed++
		if err != nil || d != want {
			mismatches = append(mismatches, fmt.Sprintf("handed %+v, decoded %+v (%v)", d, want, err))
		}
	}
	t.Cleanup(func() { testHandedDispatch = nil })

	eachFlushMode(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		v6 := netip.MustParseAddrPort("[2001:db8::7]:4242")
		var msgs []*message.Ext
		for i := range 120 {
			m := &message.Ext{Message: message.Message{Topic: fmt.Sprintf("T%d", i%3), Body: []byte(fmt.Sprintf("body-%d", i))},
				QueueID: int32(i % 4)}
			switch i % 6 {
			case 0:
				m.SetProperty(message.PropertyTags, fmt.Sprintf("tag%d", i%5))
				m.SetProperty(message.PropertyKeys, fmt.Sprintf("k%d shared", i))
				m.SetProperty(message.PropertyUniqueKey, fmt.Sprintf("UNIQ%08d", i))
			case 1:
				m.SetProperty(message.PropertyDelayLevel, "3")
				m.SetProperty(message.PropertyTags, "")
			case 2:
				m.SetProperty(message.PropertyTimerOutMS, "1700000000000")
				m.BornHost = v6
			case 3:
				m.SysFlag = message.SysFlagTransPrepared
				m.SetProperty(message.PropertyUniqueKey, fmt.Sprintf("HALF%d", i))
			case 4:
				m.SetProperty(message.PropertyDelayLevel, "not a number")
				m.SetProperty("custom", "v")
			}
			msgs = append(msgs, m)
		}
		var last PutResult
		for i := 0; i < len(msgs); i += 8 {
			res, err := s.PutBatch(ctx, msgs[i:i+8], nil)
			if err != nil {
				t.Fatal(err)
			}
			last = res[len(res)-1]
		}
		if err := s.WaitDispatched(ctx, last.End()); err != nil {
			t.Fatal(err)
		}
	})
	mu.Lock()
	defer mu.Unlock()
	for _, m := range mismatches {
		t.Error(m)
	}
	if handed < 200 {
		t.Fatalf("the dispatcher was handed %d of 240 records; it decoded the rest", handed)
	}
}
