package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// fakeClock is a settable time source.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestSelector(retry time.Duration) (*readSelector, *fakeClock) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	s := newReadSelector(retry, zap.NewNop())
	s.now = clk.now
	return s, clk
}

func readGroup(addrs map[int64]string) BrokerData {
	return BrokerData{Cluster: "c", BrokerName: "broker-a", Addrs: addrs}
}

func TestLowestSlave(t *testing.T) {
	cases := []struct {
		addrs    map[int64]string
		id       int64
		addr     string
		readAddr string
	}{
		{map[int64]string{0: "m"}, 0, "", "m"},
		{map[int64]string{0: "m", 2: "s2", 1: "s1"}, 1, "s1", "m"},
		{map[int64]string{3: "s3", 2: "s2"}, 2, "s2", "s2"},
		{map[int64]string{}, 0, "", ""},
		{nil, 0, "", ""},
	}
	for _, c := range cases {
		bd := readGroup(c.addrs)
		id, addr := bd.lowestSlave()
		if id != c.id || addr != c.addr || bd.ReadAddr() != c.readAddr {
			t.Errorf("%v: lowestSlave %d %q, ReadAddr %q; want %d %q, %q", c.addrs, id, addr, bd.ReadAddr(), c.id, c.addr, c.readAddr)
		}
	}
}

func TestReadSelectorPick(t *testing.T) {
	cases := []struct {
		name    string
		addrs   map[int64]string
		orderly bool
		id      int64
		addr    string
		onSlave bool
	}{
		{"master", map[int64]string{0: "m", 1: "s1"}, false, 0, "m", false},
		{"no master: lowest slave", map[int64]string{2: "s2", 1: "s1"}, false, 1, "s1", true},
		{"nothing", map[int64]string{}, false, 0, "", false},
		{"orderly waits for the master", map[int64]string{1: "s1"}, true, 0, "", false},
		{"orderly on the master", map[int64]string{0: "m", 1: "s1"}, true, 0, "m", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newTestSelector(time.Second)
			id, addr := s.pick(readGroup(c.addrs), c.orderly)
			if id != c.id || addr != c.addr {
				t.Fatalf("pick = %d %q, want %d %q", id, addr, c.id, c.addr)
			}
			if _, on := s.onSlave("broker-a"); on != c.onSlave {
				t.Fatalf("on a slave: %v, want %v", on, c.onSlave)
			}
		})
	}
}

// TestReadSelectorFailOverAndBack walks a group from its master to a slave
// and back, on a fake clock.
func TestReadSelectorFailOverAndBack(t *testing.T) {
	s, clk := newTestSelector(3 * time.Second)
	full := readGroup(map[int64]string{0: "m", 1: "s1", 2: "s2"})
	if s.masterFailed(readGroup(map[int64]string{0: "m"}), errors.New("refused")) {
		t.Fatal("moved to a slave that does not exist")
	}
	if !s.masterFailed(full, errors.New("refused")) {
		t.Fatal("did not move to the slave")
	}
	if !s.masterFailed(full, errors.New("again")) {
		t.Fatal("a second failed read is not told to go to the slave")
	}
	if n := len(s.groups); n != 1 {
		t.Fatalf("%d groups on slaves", n)
	}
	// The master is still routed: the group stays on the slave until the
	// master is found back.
	if id, addr := s.pick(full, false); id != 1 || addr != "s1" {
		t.Fatalf("pick = %d %q, want the slave", id, addr)
	}
	if s.due("broker-a") {
		t.Fatal("due before the retry interval")
	}
	if got := s.suspend(1, 15*time.Second); got != 3*time.Second {
		t.Fatalf("slave long poll %v, want the retry interval", got)
	}
	if got := s.suspend(0, 15*time.Second); got != 15*time.Second {
		t.Fatalf("master long poll %v", got)
	}
	clk.advance(3 * time.Second)
	if !s.due("broker-a") {
		t.Fatal("not due after the retry interval")
	}
	if s.due("broker-a") {
		t.Fatal("due for two callers at once")
	}
	s.checked("broker-a", false) // the master did not answer
	if s.due("broker-a") {
		t.Fatal("due again right after a failed look")
	}
	clk.advance(3 * time.Second)
	if !s.due("broker-a") {
		t.Fatal("not due one interval after a failed look")
	}
	s.checked("broker-a", true)
	if _, on := s.onSlave("broker-a"); on {
		t.Fatal("still on the slave")
	}
	if id, addr := s.pick(full, false); id != 0 || addr != "m" {
		t.Fatalf("pick = %d %q, want the master", id, addr)
	}
	if s.due("broker-a") {
		t.Fatal("due while on the master")
	}
	s.checked("broker-a", true) // no entry: nothing happens
}

func TestReadSelectorSlaveChanges(t *testing.T) {
	s, _ := newTestSelector(time.Minute)
	if id, addr := s.pick(readGroup(map[int64]string{1: "s1", 2: "s2"}), false); id != 1 || addr != "s1" {
		t.Fatalf("pick = %d %q", id, addr)
	}
	// Slave 1 left the route: the next lowest one.
	if id, addr := s.pick(readGroup(map[int64]string{2: "s2"}), false); id != 2 || addr != "s2" {
		t.Fatalf("pick = %d %q, want slave 2", id, addr)
	}
	// Slave 1 is back: stay on slave 2.
	if id, addr := s.pick(readGroup(map[int64]string{1: "s1", 2: "s2"}), false); id != 2 || addr != "s2" {
		t.Fatalf("pick = %d %q, want slave 2 still", id, addr)
	}
	// A failing slave makes the next read look for the master at once.
	s.slaveFailed("broker-a")
	if !s.due("broker-a") {
		t.Fatal("not due after the slave failed")
	}
	s.checked("broker-a", false)
	// No slave left and a master routed: nothing until the master is
	// found back (which commits the offsets first), and that is due now.
	if id, addr := s.pick(readGroup(map[int64]string{0: "m"}), false); addr != "" {
		t.Fatalf("pick = %d %q, want nothing", id, addr)
	}
	if !s.due("broker-a") {
		t.Fatal("not due with no slave left")
	}
}

func TestReadUnavailable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unavailable, "connection refused"), true},
		{fmt.Errorf("pull: %w", status.Error(codes.Unavailable, "x")), true},
		{context.DeadlineExceeded, true},
		{codeErr(pb.Code_SHUTTING_DOWN, "stopping"), true},
		{codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "no address"), true},
		{codeErr(pb.Code_TOPIC_NOT_EXIST, "no topic"), false},
		{codeErr(pb.Code_INVALID_PARAMETER, "bad"), false},
		{status.Error(codes.InvalidArgument, "bad"), false},
		{errors.New("plain"), false},
	}
	for _, c := range cases {
		if got := readUnavailable(c.err); got != c.want {
			t.Errorf("readUnavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestListAddrs(t *testing.T) {
	cases := []struct {
		name    string
		addrs   map[int64]string
		orderly bool
		failed  bool // the master failed a read before
		want    []string
	}{
		{"master first", map[int64]string{0: "m", 2: "s2", 1: "s1"}, false, false, []string{"m", "s1"}},
		{"read from the slave", map[int64]string{0: "m", 1: "s1"}, false, true, []string{"s1", "m"}},
		{"no master", map[int64]string{1: "s1"}, false, false, []string{"s1"}},
		{"orderly: the master", map[int64]string{0: "m", 1: "s1"}, true, true, []string{"m"}},
		{"orderly without a master", map[int64]string{1: "s1"}, true, false, []string{"s1"}},
		{"nothing", map[int64]string{}, false, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newTestSelector(time.Second)
			cc := &consumerCore{reads: s, orderly: c.orderly}
			bd := readGroup(c.addrs)
			if c.failed && !s.masterFailed(bd, errors.New("refused")) {
				t.Fatal("no move to the slave")
			}
			if got := cc.listAddrs(bd); !slices.Equal(got, c.want) {
				t.Fatalf("listAddrs = %q, want %q", got, c.want)
			}
		})
	}
}
