package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// BrokerProcOptions describe a broker process of a replicated group.
type BrokerProcOptions struct {
	NameServer string
	Name       string
	// ID 0 starts a master, > 0 a slave.
	ID int64
	// StoreDir ("" = a new temporary directory).
	StoreDir string
	// Flush is "sync" or "async" (default); Replication "sync" or "async"
	// (default); InSyncReplicas 0 keeps the default (1).
	Flush          string
	Replication    string
	InSyncReplicas int
	// SegmentSize of the CommitLog (64 MiB by default).
	SegmentSize int64
	// MasterHAAddr points a slave at its master ("" = from the NameServer).
	MasterHAAddr string
	// Extra flags.
	Extra []string
}

// BrokerProc is a broker running as a child process.
type BrokerProc struct {
	*Proc
	StoreDir string
}

// StartBrokerProc starts bolide-broker as a member of a replicated group
// with short intervals for tests (registration 500 ms, HA heartbeat 200 ms,
// HA timeout 2 s, metadata sync 200 ms), gossip off.
func StartBrokerProc(t testing.TB, o BrokerProcOptions) *BrokerProc {
	t.Helper()
	if o.StoreDir == "" {
		o.StoreDir = t.TempDir()
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = 64 << 20
	}
	if o.Flush == "" {
		o.Flush = "async"
	}
	if o.Replication == "" {
		o.Replication = "async"
	}
	args := []string{"--listen", "127.0.0.1:0", "--ha-listen", "127.0.0.1:0", "--namesrv", o.NameServer,
		"--broker-name", o.Name, "--broker-id", strconv.FormatInt(o.ID, 10), "--store-dir", o.StoreDir,
		"--segment-size", strconv.FormatInt(o.SegmentSize, 10), "--flush", o.Flush, "--replication", o.Replication,
		"--register-interval", "500ms", "--gossip", "off", "--ha-heartbeat", "200ms", "--ha-timeout", "2s",
		"--metadata-sync-interval", "200ms"}
	if o.InSyncReplicas > 0 {
		args = append(args, "--in-sync-replicas", strconv.Itoa(o.InSyncReplicas))
	}
	if o.MasterHAAddr != "" {
		args = append(args, "--master-ha-addr", o.MasterHAAddr)
	}
	args = append(args, o.Extra...)
	return &BrokerProc{Proc: StartProc(t, "bolide-broker", args...), StoreDir: o.StoreDir}
}

// BrokerInfo asks a broker for its GetBrokerInfo.
func BrokerInfo(addr string) (*pb.GetBrokerInfoResponse, error) {
	conn, err := dial(addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := pb.NewBrokerClient(conn).GetBrokerInfo(ctx, &pb.GetBrokerInfoRequest{})
	if err != nil {
		return nil, err
	}
	return resp, wire.FromStatus(resp.Status)
}

// CommitLogDir is a broker's CommitLog directory under its store dir.
func CommitLogDir(storeDir string) string { return filepath.Join(storeDir, "store", "commitlog") }

// segmentFiles lists a CommitLog directory's segments by start offset.
func segmentFiles(dir string) (map[int64]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]string)
	for _, e := range entries {
		if len(e.Name()) != 20 {
			continue
		}
		if v, err := strconv.ParseInt(e.Name(), 10, 64); err == nil {
			out[v] = filepath.Join(dir, e.Name())
		}
	}
	return out, nil
}

// CompareCommitLogs checks that two CommitLog directories hold the same
// bytes from the later of their first segments up to end, segment by
// segment (SHA-256 of each file's prefix), and reports how many bytes it
// compared.
func CompareCommitLogs(dirA, dirB string, segSize, end int64) (int64, error) {
	a, err := segmentFiles(dirA)
	if err != nil {
		return 0, err
	}
	b, err := segmentFiles(dirB)
	if err != nil {
		return 0, err
	}
	first := int64(-1)
	for s := range a {
		if _, ok := b[s]; ok && (first < 0 || s < first) {
			first = s
		}
	}
	if first < 0 {
		return 0, errors.New("no common segment")
	}
	var compared int64
	for s := first; s < end; s += segSize {
		pa, pb := a[s], b[s]
		if pa == "" || pb == "" {
			return compared, fmt.Errorf("segment %d missing (%q, %q)", s, pa, pb)
		}
		n := min(segSize, end-s)
		ha, err := prefixSum(pa, n)
		if err != nil {
			return compared, err
		}
		hb, err := prefixSum(pb, n)
		if err != nil {
			return compared, err
		}
		if !bytes.Equal(ha, hb) {
			return compared, fmt.Errorf("segment %d: the first %d bytes differ (sha256 %x vs %x)", s, n, ha[:8], hb[:8])
		}
		compared += n
	}
	return compared, nil
}

func prefixSum(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, n); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h.Sum(nil), nil
}

// DurableOffset reads the FlushedOffset of a stopped broker's newest valid
// checkpoint (broker/store's format: two 512-byte slots, see its doc.go): a
// CommitLog offset the broker had made durable.
func DurableOffset(storeDir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(storeDir, "store", "checkpoint"))
	if err != nil {
		return 0, err
	}
	best, bestSeq := int64(-1), int64(-1)
	be := binary.BigEndian
	for slot := 0; slot+60 <= len(b) && slot < 1024; slot += 512 {
		s := b[slot:]
		end := 56 // version 1: five fields; version 2: eight
		if be.Uint32(s[12:]) == 2 && slot+84 <= len(b) {
			end = 80
		}
		if be.Uint32(s[8:]) != 0x424C4350 || crc32.ChecksumIEEE(s[8:end]) != be.Uint32(s[end:]) {
			continue
		}
		if seq := int64(be.Uint64(s)); seq > bestSeq {
			bestSeq, best = seq, int64(be.Uint64(s[32:]))
		}
	}
	if best < 0 {
		return 0, errors.New("no valid checkpoint")
	}
	return best, nil
}

// PowerLoss simulates a power loss of a stopped broker: every CommitLog
// byte from durable on is lost (files cut there, later files emptied).
func PowerLoss(storeDir string, durable int64) error {
	segs, err := segmentFiles(CommitLogDir(storeDir))
	if err != nil {
		return err
	}
	starts := make([]int64, 0, len(segs))
	for s := range segs {
		starts = append(starts, s)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for _, s := range starts {
		st, err := os.Stat(segs[s])
		if err != nil {
			return err
		}
		switch {
		case s >= durable:
			err = os.Truncate(segs[s], 0)
		case s+st.Size() > durable:
			err = os.Truncate(segs[s], durable-s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
