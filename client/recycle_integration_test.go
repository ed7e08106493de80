package client

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"
)

// TestRecycledPropertiesCarryNothingOver: the property maps of sent messages
// are used again for the next ones (recycleWireProperties); a message sent
// after others with more properties arrives with its own and nothing else,
// whether sent alone, in a batch or asynchronously, and the caller's map is
// left as it was.
func TestRecycledPropertiesCarryNothingOver(t *testing.T) {
	e := startEnv(t, 1, 1)
	topic := e.topic(2)
	p := e.producer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	heavy := func(i int) *Message {
		return &Message{Topic: topic, Body: []byte("heavy"), Tag: "h", Keys: []string{fmt.Sprint("heavy-", i)},
			Properties: map[string]string{"a": "1", "b": "2", "c": "3"}}
	}
	userProps := map[string]string{"only": "mine"}
	light := func(i int) *Message {
		return &Message{Topic: topic, Body: []byte(fmt.Sprint("light-", i)), Properties: userProps}
	}
	var stored []*SendResult
	var bodies []string
	for round := range 3 {
		// Maps filled with more properties go back to the pool first.
		hs := make([]*Message, 8)
		for i := range hs {
			hs[i] = heavy(round*8 + i)
		}
		if _, err := p.SendBatch(ctx, hs); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Send(ctx, heavy(100+round)); err != nil {
			t.Fatal(err)
		}
		// Then lighter messages, each way.
		alone := light(3 * round)
		r, err := p.Send(ctx, alone)
		if err != nil {
			t.Fatal(err)
		}
		stored, bodies = append(stored, r), append(bodies, string(alone.Body))
		batch := []*Message{light(3*round + 1)}
		rs, err := p.SendBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		stored, bodies = append(stored, rs[0]), append(bodies, string(batch[0].Body))
		var wg sync.WaitGroup
		wg.Add(1)
		async := light(3*round + 2)
		p.SendAsync(ctx, async, func(r *SendResult, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
				return
			}
			stored, bodies = append(stored, r), append(bodies, string(async.Body))
		})
		wg.Wait()
	}
	if !maps.Equal(userProps, map[string]string{"only": "mine"}) {
		t.Errorf("the caller's properties became %v", userProps)
	}
	for i, r := range stored {
		m, err := e.admin.ViewMessageAt(ctx, r.Queue(topic), r.QueueOffset)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Body) != bodies[i] {
			t.Fatalf("message %d: body %q, want %q", i, m.Body, bodies[i])
		}
		if m.Properties["only"] != "mine" || m.Tag != "" || len(m.Keys) != 0 {
			t.Errorf("message %q: tag %q, keys %v, properties %v", m.Body, m.Tag, m.Keys, m.Properties)
		}
		for _, k := range []string{"a", "b", "c"} {
			if v, ok := m.Properties[k]; ok {
				t.Errorf("message %q carries %s=%s of an earlier message", m.Body, k, v)
			}
		}
	}
}
