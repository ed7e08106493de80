package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// offsetStore keeps a group's consume offsets: in memory as consumption
// advances, persisted (committed) periodically and when a queue is given
// up. An offset is the next offset to consume.
type offsetStore interface {
	// read returns the persisted offset of mq, or -1 when there is none.
	read(ctx context.Context, mq MessageQueue) (int64, error)
	// update records the offset to persist for mq.
	update(mq MessageQueue, offset int64)
	// current returns the in-memory offset of mq, or -1.
	current(mq MessageQueue) int64
	// persist writes the offsets of mqs (every known queue when mqs is
	// nil) that changed since they were last persisted.
	persist(ctx context.Context, mqs []MessageQueue) error
	// forget drops mq from memory.
	forget(mq MessageQueue)
}

// memOffsets is the in-memory part shared by both stores.
type memOffsets struct {
	mu        sync.Mutex
	offsets   map[MessageQueue]int64
	persisted map[MessageQueue]int64
}

func newMemOffsets() memOffsets {
	return memOffsets{offsets: make(map[MessageQueue]int64), persisted: make(map[MessageQueue]int64)}
}

func (m *memOffsets) update(mq MessageQueue, offset int64) {
	m.mu.Lock()
	m.offsets[mq] = offset
	m.mu.Unlock()
}

func (m *memOffsets) current(mq MessageQueue) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off, ok := m.offsets[mq]; ok {
		return off
	}
	return -1
}

func (m *memOffsets) forget(mq MessageQueue) {
	m.mu.Lock()
	delete(m.offsets, mq)
	delete(m.persisted, mq)
	m.mu.Unlock()
}

// dirty returns the offsets of mqs (all when nil) not yet persisted.
func (m *memOffsets) dirty(mqs []MessageQueue) map[MessageQueue]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[MessageQueue]int64)
	add := func(mq MessageQueue) {
		off, ok := m.offsets[mq]
		if !ok {
			return
		}
		if p, done := m.persisted[mq]; done && p == off {
			return
		}
		out[mq] = off
	}
	if mqs == nil {
		for mq := range m.offsets {
			add(mq)
		}
	} else {
		for _, mq := range mqs {
			add(mq)
		}
	}
	return out
}

func (m *memOffsets) markPersisted(offs map[MessageQueue]int64) {
	m.mu.Lock()
	for mq, off := range offs {
		if _, ok := m.offsets[mq]; ok {
			m.persisted[mq] = off
		}
	}
	m.mu.Unlock()
}

// remoteOffsetStore keeps clustering offsets on the brokers.
type remoteOffsetStore struct {
	memOffsets
	group string
	c     *consumerCore
	// persistMu makes commits one at a time, in order: a periodic commit
	// still on the wire when a queue is released must not land after the
	// release's final commit and move the offset back (the next owner of
	// an orderly queue would consume its last messages again).
	persistMu sync.Mutex
}

func newRemoteOffsetStore(c *consumerCore) *remoteOffsetStore {
	return &remoteOffsetStore{memOffsets: newMemOffsets(), group: c.group, c: c}
}

func (s *remoteOffsetStore) read(ctx context.Context, mq MessageQueue) (int64, error) {
	cli, addr, err := s.c.brokerFor(ctx, mq, false) // the master, or the slave read from
	if err != nil {
		return -1, err
	}
	rctx, cancel := s.c.rpcContext(ctx)
	defer cancel()
	resp, err := cli.QueryOffset(rctx, &pb.QueryOffsetRequest{Group: s.group, Topic: mq.Topic, QueueId: mq.QueueID})
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	switch {
	case errors.Is(err, ErrQueryNotFound):
		return -1, nil
	case err != nil:
		return -1, fmt.Errorf("query offset of %s at %s: %w", mq, addr, err)
	}
	if resp.GetOffset() < 0 {
		return -1, nil
	}
	return resp.GetOffset(), nil
}

func (s *remoteOffsetStore) persist(ctx context.Context, mqs []MessageQueue) error {
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	// A commit, once begun, is not abandoned when ctx is cancelled (the
	// broker could still apply it after a later one); ctx's deadline, or
	// else the RPC timeout, bounds it.
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), dl)
		defer cancel()
	} else {
		ctx = context.WithoutCancel(ctx)
	}
	dirty := s.dirty(mqs)
	if len(dirty) == 0 {
		return nil
	}
	byBroker := make(map[string]map[MessageQueue]int64)
	for mq, off := range dirty {
		if byBroker[mq.BrokerName] == nil {
			byBroker[mq.BrokerName] = make(map[MessageQueue]int64)
		}
		byBroker[mq.BrokerName][mq] = off
	}
	var errs []error
	for broker, offs := range byBroker {
		if err := s.commit(ctx, broker, offs); err != nil {
			errs = append(errs, err)
			continue
		}
		s.markPersisted(offs)
	}
	return errors.Join(errs...)
}

func (s *remoteOffsetStore) commit(ctx context.Context, broker string, offs map[MessageQueue]int64) error {
	var any MessageQueue
	req := &pb.CommitOffsetsRequest{Group: s.group}
	for mq, off := range offs {
		any = mq
		req.Offsets = append(req.Offsets, &pb.QueueOffset{Topic: mq.Topic, QueueId: mq.QueueID, Offset: off})
	}
	sort.Slice(req.Offsets, func(i, j int) bool {
		a, b := req.Offsets[i], req.Offsets[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.QueueId < b.QueueId
	})
	cli, addr, err := s.c.brokerFor(ctx, any, false) // the master, or the slave read from
	if err != nil {
		return fmt.Errorf("commit offsets to %s: %w", broker, err)
	}
	rctx, cancel := s.c.rpcContext(ctx)
	defer cancel()
	resp, err := cli.CommitOffsets(rctx, req)
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return fmt.Errorf("commit %d offsets to %s (%s): %w", len(req.Offsets), broker, addr, err)
	}
	return nil
}

// localOffsetStore keeps broadcasting offsets in a JSON file on the client,
// replaced atomically (temp file, fsync, rename, fsync of the directory).
type localOffsetStore struct {
	memOffsets
	path  string
	group string

	fileMu sync.Mutex
	loaded map[MessageQueue]int64
}

// offsetFileData is the file's layout.
type offsetFileData struct {
	Group   string            `json:"group"`
	Offsets []offsetFileEntry `json:"offsets"`
}

type offsetFileEntry struct {
	Topic  string `json:"topic"`
	Broker string `json:"broker"`
	Queue  int32  `json:"queue_id"`
	Offset int64  `json:"offset"`
}

// newLocalOffsetStore opens the store, reading the file if it exists.
func newLocalOffsetStore(path, group string) (*localOffsetStore, error) {
	s := &localOffsetStore{memOffsets: newMemOffsets(), path: path, group: group, loaded: make(map[MessageQueue]int64)}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("read offset file: %w", err)
	}
	var f offsetFileData
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse offset file %s: %w", path, err)
	}
	for _, e := range f.Offsets {
		s.loaded[MessageQueue{Topic: e.Topic, BrokerName: e.Broker, QueueID: e.Queue}] = e.Offset
	}
	return s, nil
}

func (s *localOffsetStore) read(_ context.Context, mq MessageQueue) (int64, error) {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if off, ok := s.loaded[mq]; ok {
		return off, nil
	}
	return -1, nil
}

func (s *localOffsetStore) persist(_ context.Context, mqs []MessageQueue) error {
	dirty := s.dirty(mqs)
	if len(dirty) == 0 {
		return nil
	}
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	next := make(map[MessageQueue]int64, len(s.loaded)+len(dirty))
	for mq, off := range s.loaded {
		next[mq] = off
	}
	for mq, off := range dirty {
		next[mq] = off
	}
	if err := writeOffsetFile(s.path, s.group, next); err != nil {
		return err
	}
	s.loaded = next
	s.markPersisted(dirty)
	return nil
}

func writeOffsetFile(path, group string, offs map[MessageQueue]int64) error {
	f := offsetFileData{Group: group, Offsets: make([]offsetFileEntry, 0, len(offs))}
	for mq, off := range offs {
		f.Offsets = append(f.Offsets, offsetFileEntry{Topic: mq.Topic, Broker: mq.BrokerName, Queue: mq.QueueID, Offset: off})
	}
	sort.Slice(f.Offsets, func(i, j int) bool {
		a, b := f.Offsets[i], f.Offsets[j]
		return lessQueue(MessageQueue{a.Topic, a.Broker, a.Queue}, MessageQueue{b.Topic, b.Broker, b.Queue})
	})
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encode offsets: %w", err)
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// writeFileAtomic replaces path with data so that a crash leaves either the
// old or the new content.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
