package remoting_test

import (
	"context"
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestBadInputKeepsTheBrokerServing sends what a broken or hostile client
// might: unknown request codes, a header that is not JSON, a length that
// lies, a header longer than its frame, a frame over the limit, half a
// frame and then nothing. Each gets a coded answer or the close of its own
// connection; the broker keeps serving the others.
func TestBadInputKeepsTheBrokerServing(t *testing.T) {
	b := startBroker(t)
	good := dialBroker(t, b.Addr(), nil)

	if resp := invoke(t, good, 99999, nil, nil); resp.Code != rmq.RequestCodeNotSupported || resp.Remark == "" {
		t.Fatalf("unknown code: %+v", resp)
	}
	if resp := invoke(t, good, rmq.UpdateBrokerConfig, nil, []byte("flushDiskType=SYNC_FLUSH")); resp.Code == rmq.Success {
		t.Fatalf("broker configuration changed over the wire: %+v", resp)
	}

	raw := func() net.Conn {
		nc, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		return nc
	}
	frame := func(header string) []byte {
		f := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)))
		f = binary.BigEndian.AppendUint32(f, uint32(len(header)))
		return append(f, header...)
	}

	// Header JSON that is not JSON: SYSTEM_ERROR, the connection stays.
	nc := raw()
	write(t, nc, frame(`{"code":34,"opaque":5,"extFields":{"a":`))
	if resp := read(t, nc); resp.Code != rmq.SystemError || resp.Opaque != 5 {
		t.Fatalf("bad JSON: %+v", resp)
	}
	write(t, nc, rmq.AppendFrame(nil, &rmq.Command{Code: 99999, Opaque: 6}))
	if resp := read(t, nc); resp.Code != rmq.RequestCodeNotSupported || resp.Opaque != 6 {
		t.Fatalf("after bad JSON: %+v", resp)
	}

	// A header length beyond the frame: the frame is dropped (its opaque
	// cannot be read), the connection stays.
	bad := binary.BigEndian.AppendUint32(nil, 8)
	bad = binary.BigEndian.AppendUint32(bad, 1000)
	write(t, nc, append(bad, "{}{}"...))
	write(t, nc, rmq.AppendFrame(nil, &rmq.Command{Code: 99999, Opaque: 7}))
	if resp := read(t, nc); resp.Opaque != 7 {
		t.Fatalf("after a bad header length: %+v", resp)
	}

	// A frame over the limit, and a length under the header word: closed.
	for _, head := range [][]byte{binary.BigEndian.AppendUint32(nil, 64<<20), {0, 0, 0, 1, 0}} {
		nc := raw()
		write(t, nc, head)
		expectClosed(t, nc)
	}

	// Half frames that claim 16 MiB, then silence, on many connections:
	// the broker holds what arrived, not what was claimed.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const conns = 64
	for range conns {
		nc := raw()
		write(t, nc, binary.BigEndian.AppendUint32(nil, 16<<20-1))
		write(t, nc, make([]byte, 1000))
	}
	if resp := invoke(t, good, 99999, nil, nil); resp.Code != rmq.RequestCodeNotSupported {
		t.Fatalf("while stalled: %+v", resp)
	}
	time.Sleep(200 * time.Millisecond) // let every reader take its bytes
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > conns*256<<10 {
		t.Fatalf("%d stalled half frames grew the heap by %d bytes", conns, grown)
	}
}

func write(t *testing.T, nc net.Conn, b []byte) {
	t.Helper()
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, nc net.Conn) *rmq.Command {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := rmq.ReadFrame(nc, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rmq.DecodeFrame(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func expectClosed(t *testing.T, nc net.Conn) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection not closed")
	}
}

// TestRemotingOff checks server.WithRemoting(false) (bolide-broker
// --remoting=false): remoting connections are closed, Bolide's protocols
// are served as before.
func TestRemotingOff(t *testing.T) {
	opts := broker.DefaultOptions(t.TempDir())
	opts.ListenAddr = "127.0.0.1:0"
	opts.NameServers = nil
	opts.GossipAddr = "off"
	opts.Store.CommitLog.SegmentSize = 4 << 20
	opts.MaxMessageSize = 1 << 20
	b, err := server.New(opts, nil, server.WithRemoting(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	nc, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	write(t, nc, rmq.AppendFrame(nil, &rmq.Command{Code: rmq.HeartBeat, Opaque: 1}))
	expectClosed(t, nc)

	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := pb.NewBrokerClient(conn).GetBrokerInfo(ctx, &pb.GetBrokerInfoRequest{})
	if err != nil || info.GetBrokerName() != opts.BrokerName {
		t.Fatalf("gRPC beside remoting off: %v %v", info, err)
	}
}
