package ha

import (
	"testing"
	"time"
)

// BenchmarkStream measures the protocol's throughput on loopback: a slave
// copies a 64 MiB log of 1 KiB records from the master, both in memory, so
// the figure is TCP, framing and the slave's record verification (CRC of
// every record), without disks.
//
//	go test -run '^$' -bench BenchmarkStream ./ha/
func BenchmarkStream(b *testing.B) {
	master := newMemLog(64 << 20)
	for master.MaxOffset() < 64<<20-8<<10 {
		master.append(1024-117, 'x')
	}
	size := master.MaxOffset()
	o := DefaultServerOptions()
	o.ListenAddr = "127.0.0.1:0"
	o.BrokerName = "b"
	srv, err := NewServer(o, master, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv.Start()
	defer srv.Close()
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		slave := newMemLog(64 << 20)
		co := DefaultClientOptions()
		co.BrokerName = "b"
		co.BrokerID = 1
		co.MasterAddr = srv.Addr
		c, err := NewClient(co, slave, nil)
		if err != nil {
			b.Fatal(err)
		}
		c.Start()
		for slave.MaxOffset() < size {
			time.Sleep(100 * time.Microsecond)
		}
		b.StopTimer()
		_ = c.Close()
		b.StartTimer()
	}
}
