package client

import (
	"fmt"
	"slices"
	"testing"
)

func queuesOf(brokers map[string]int) []MessageQueue {
	var out []MessageQueue
	for b, n := range brokers {
		for i := 0; i < n; i++ {
			out = append(out, MessageQueue{Topic: "t", BrokerName: b, QueueID: int32(i)})
		}
	}
	slices.SortFunc(out, compareQueue)
	return out
}

func cids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c%02d", i)
	}
	return out
}

func ids(qs []MessageQueue) string {
	s := ""
	for _, q := range qs {
		s += fmt.Sprintf("%s%d ", q.BrokerName, q.QueueID)
	}
	return s
}

func TestAllocateAverage(t *testing.T) {
	qs := queuesOf(map[string]int{"a": 4, "b": 4})
	tests := []struct {
		name    string
		queues  []MessageQueue
		clients []string
		me      string
		want    string
	}{
		{"one consumer takes all", qs, cids(1), "c00", "a0 a1 a2 a3 b0 b1 b2 b3 "},
		{"two split in halves", qs, cids(2), "c01", "b0 b1 b2 b3 "},
		{"three: first gets the extra", qs, cids(3), "c00", "a0 a1 a2 "},
		{"three: second gets the extra", qs, cids(3), "c01", "a3 b0 b1 "},
		{"three: last is short", qs, cids(3), "c02", "b2 b3 "},
		{"eight: one each", qs, cids(8), "c05", "b1 "},
		{"more consumers than queues: early one", queuesOf(map[string]int{"a": 3}), cids(5), "c02", "a2 "},
		{"more consumers than queues: late one", queuesOf(map[string]int{"a": 3}), cids(5), "c03", ""},
		{"not a member", qs, cids(3), "zz", ""},
		{"no queues", nil, cids(3), "c00", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ids(AllocateAverage{}.Allocate("g", tt.me, tt.queues, tt.clients))
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// Every strategy must give each queue to exactly one member, whatever the
// numbers of queues and members.
func TestAllocateCoversEachQueueOnce(t *testing.T) {
	for _, s := range []AllocateStrategy{AllocateAverage{}, AllocateAverageByCircle{}} {
		for nq := 0; nq <= 17; nq++ {
			for nc := 1; nc <= 11; nc++ {
				qs := queuesOf(map[string]int{"a": nq / 2, "b": nq - nq/2})
				owners := make(map[MessageQueue]int)
				sizes := make([]int, nc)
				for i, c := range cids(nc) {
					got := s.Allocate("g", c, qs, cids(nc))
					sizes[i] = len(got)
					for _, q := range got {
						owners[q]++
					}
					if s.Name() == "AVG" && len(got) > 1 {
						// Contiguous: consecutive positions in the sorted list.
						start := slices.Index(qs, got[0])
						for k, q := range got {
							if qs[start+k] != q {
								t.Fatalf("%s %d/%d: %s's queues are not contiguous", s.Name(), nq, nc, c)
							}
						}
					}
				}
				for _, q := range qs {
					if owners[q] != 1 {
						t.Fatalf("%s %d queues %d clients: %s owned %d times", s.Name(), nq, nc, q, owners[q])
					}
				}
				lo, hi := slices.Min(sizes), slices.Max(sizes)
				if hi-lo > 1 {
					t.Fatalf("%s %d/%d: unbalanced sizes %v", s.Name(), nq, nc, sizes)
				}
			}
		}
	}
}

func TestAllocateAverageByCircle(t *testing.T) {
	qs := queuesOf(map[string]int{"a": 4, "b": 3})
	got := ids(AllocateAverageByCircle{}.Allocate("g", "c01", qs, cids(3)))
	if want := "a1 b0 "; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
