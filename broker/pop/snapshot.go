package pop

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sort"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// SnapshotVersion is the version of the snapshot file format.
const SnapshotVersion = 1

// snapshotFile is the snapshot's JSON document (see the package
// documentation).
type snapshotFile struct {
	Version   int         `json:"version"`
	LogOffset int64       `json:"logOffset"`
	Seq       uint64      `json:"seq"`
	Queues    []snapQueue `json:"queues"`
	CRC       uint32      `json:"crc"`
}

type snapQueue struct {
	Group       string      `json:"group"`
	Topic       string      `json:"topic"`
	QueueID     int32       `json:"queueId"`
	Next        int64       `json:"next"`
	AttemptID   string      `json:"attemptId,omitempty"`
	Redelivered int64       `json:"redelivered"`
	InFlight    []snapEntry `json:"inFlight,omitempty"`
}

type snapEntry struct {
	Offset      int64  `json:"offset"`
	Attempt     int32  `json:"attempt"`
	Seq         uint64 `json:"seq"`
	VisibleAtMS int64  `json:"visibleAt"`
	PopMS       int64  `json:"popTime"`
	InvisibleMS int64  `json:"invisible"`
	Client      string `json:"client,omitempty"`
}

// crcOf is the CRC-32C of the document's JSON with crc 0.
func crcOf(f *snapshotFile) (uint32, error) {
	c := *f
	c.CRC = 0
	b, err := json.Marshal(&c)
	if err != nil {
		return 0, err
	}
	return crc32.Checksum(b, castagnoli), nil
}

// capture copies the state; s.snapMu is held exclusively.
func (s *Service) capture() *snapshotFile {
	f := &snapshotFile{Version: SnapshotVersion, LogOffset: s.tailPos.Load(), Seq: s.seq.Load()}
	for _, gt := range s.groupTopics() {
		gt.mu.Lock()
		for qid, q := range gt.qs {
			sq := snapQueue{Group: gt.key.group, Topic: gt.key.topic, QueueID: qid, Next: q.next, AttemptID: q.attemptID, Redelivered: q.redelivered}
			for _, off := range q.sortedInflight() {
				e := q.inflight[off]
				sq.InFlight = append(sq.InFlight, snapEntry{Offset: off, Attempt: e.attempt, Seq: e.seq, VisibleAtMS: e.visibleAt,
					PopMS: e.popMS, InvisibleMS: e.invisibleMS, Client: e.client})
			}
			f.Queues = append(f.Queues, sq)
		}
		gt.mu.Unlock()
	}
	sort.Slice(f.Queues, func(i, j int) bool {
		a, b := f.Queues[i], f.Queues[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.QueueID < b.QueueID
	})
	return f
}

// Snapshot writes a snapshot now.
func (s *Service) Snapshot() error { return s.snapshot(true) }

// snapshot writes the state (temp file, fsync, rename) unless nothing
// changed since the last one (force: write anyway).
func (s *Service) snapshot(force bool) error {
	if s.opts.SnapshotPath == "" {
		return nil
	}
	s.snapMu.Lock()
	changes := s.changes.Load()
	if !force && changes == s.snapChanges {
		s.snapMu.Unlock()
		return nil
	}
	f := s.capture()
	s.snapChanges = changes
	s.snapMu.Unlock()
	crc, err := crcOf(f)
	if err != nil {
		return fmt.Errorf("pop: snapshot: %w", err)
	}
	f.CRC = crc
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("pop: snapshot: %w", err)
	}
	if err := fsutil.WriteFileAtomic(s.opts.SnapshotPath, b, 0o644); err != nil {
		return fmt.Errorf("pop: snapshot: %w", err)
	}
	return nil
}

// loadSnapshot reads the snapshot into the (empty) state.
func (s *Service) loadSnapshot() error {
	if s.opts.SnapshotPath == "" {
		return nil
	}
	b, err := os.ReadFile(s.opts.SnapshotPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pop: read snapshot: %w", err)
	}
	var f snapshotFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("pop: snapshot %s: %w", s.opts.SnapshotPath, err)
	}
	if f.Version != SnapshotVersion {
		return fmt.Errorf("pop: snapshot %s: version %d", s.opts.SnapshotPath, f.Version)
	}
	crc, err := crcOf(&f)
	if err != nil || crc != f.CRC {
		return fmt.Errorf("pop: snapshot %s: checksum mismatch", s.opts.SnapshotPath)
	}
	for _, sq := range f.Queues {
		gt := s.groupTopic(sq.Group, sq.Topic)
		q := newQueueState(sq.Next)
		q.attemptID, q.redelivered = sq.AttemptID, sq.Redelivered
		for _, e := range sq.InFlight {
			q.inflight[e.Offset] = &entry{attempt: e.Attempt, seq: e.Seq, visibleAt: e.VisibleAtMS, popMS: e.PopMS,
				invisibleMS: e.InvisibleMS, client: e.Client}
			s.seenSeq(e.Seq)
		}
		gt.mu.Lock()
		gt.qs[sq.QueueID] = q
		gt.mu.Unlock()
	}
	s.seenSeq(f.Seq)
	s.tailPos.Store(f.LogOffset)
	return nil
}
