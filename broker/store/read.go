package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bolide-mq/bolide/consumequeue"
	"github.com/bolide-mq/bolide/indexfile"
	"github.com/bolide-mq/bolide/message"
)

// GetStatus says what GetMessages found (RocketMQ's GetMessageStatus).
type GetStatus int

const (
	// Found: at least one message was returned.
	Found GetStatus = iota
	// NoMatchedMessage: messages exist from the offset but none passed the
	// filter within the scan budget; NextOffset moves past them.
	NoMatchedMessage
	// OffsetOverflowOne: the offset equals the queue's max offset — nothing
	// new yet (the long-polling case).
	OffsetOverflowOne
	// OffsetOverflowBadly: the offset is beyond the max offset.
	OffsetOverflowBadly
	// OffsetTooSmall: the offset is below the queue's min offset (its
	// messages were deleted by retention); NextOffset is the min offset.
	OffsetTooSmall
	// NoMessageInQueue: the queue does not exist, or is empty and the
	// offset is not below its min offset.
	NoMessageInQueue
)

func (s GetStatus) String() string {
	switch s {
	case Found:
		return "FOUND"
	case NoMatchedMessage:
		return "NO_MATCHED_MESSAGE"
	case OffsetOverflowOne:
		return "OFFSET_OVERFLOW_ONE"
	case OffsetOverflowBadly:
		return "OFFSET_OVERFLOW_BADLY"
	case OffsetTooSmall:
		return "OFFSET_TOO_SMALL"
	case NoMessageInQueue:
		return "NO_MESSAGE_IN_QUEUE"
	}
	return fmt.Sprintf("GetStatus(%d)", int(s))
}

// GetResult is the answer of GetMessages.
type GetResult struct {
	Status GetStatus
	// Records are stored records (copies), in queue order.
	Records [][]byte
	// QueueOffsets are the queue offsets of Records.
	QueueOffsets []int64
	// NextOffset is where the next pull should start.
	NextOffset           int64
	MinOffset, MaxOffset int64
}

// maxScanUnits bounds how many ConsumeQueue units one GetMessages call looks
// at when a filter skips most of them.
const maxScanUnits = 16 * 1024

// GetMessages reads up to maxCount messages (and about maxBytes) from a
// queue starting at offset. filter, if not nil, sees each unit's tag code and
// says whether to return it; it is asked at most once per unit, in queue
// order, so it may keep state (stop at the first unit it refuses, say).
func (s *Store) GetMessages(topic string, queueID int32, offset int64, maxCount, maxBytes int, filter func(tagCode int64) bool) (GetResult, error) {
	return s.GetMatching(topic, queueID, offset, maxCount, maxBytes, filter, nil)
}

// GetMatching is GetMessages with a second filter: match, if not nil, sees
// each record that filter let through (the bytes are only valid during the
// call) and says whether to return it. A record it refuses is neither
// copied out nor counted against maxBytes.
func (s *Store) GetMatching(topic string, queueID int32, offset int64, maxCount, maxBytes int,
	filter func(tagCode int64) bool, match func(rec []byte) bool) (GetResult, error) {
	if s.closed.Load() {
		return GetResult{}, ErrClosed
	}
	q, ok := s.cqs.Lookup(topic, queueID)
	if !ok {
		return GetResult{Status: NoMessageInQueue}, nil
	}
	res := GetResult{MinOffset: q.MinOffset(), MaxOffset: q.MaxOffset(), NextOffset: offset}
	switch {
	case offset < res.MinOffset:
		// Also when retention emptied the queue (min == max > 0): the
		// consumer is moved to where the next message will be.
		res.Status, res.NextOffset = OffsetTooSmall, res.MinOffset
		return res, nil
	case res.MaxOffset == res.MinOffset:
		res.Status, res.NextOffset = NoMessageInQueue, res.MinOffset
		return res, nil
	case offset == res.MaxOffset:
		res.Status = OffsetOverflowOne
		return res, nil
	case offset > res.MaxOffset:
		res.Status, res.NextOffset = OffsetOverflowBadly, res.MaxOffset
		return res, nil
	}
	if maxCount <= 0 {
		maxCount = 32
	}
	// Sized for what the queue holds past offset: a pull at the tail of a
	// busy queue reads one or two units, not a batch's worth.
	units := make([]consumequeue.Unit, 0, min(int64(min(maxCount*2, 1024)), res.MaxOffset-offset))
	bytes := 0
	next := offset
	scanned := 0
	minPhys := s.clog.MinOffset()
	var scratch []byte // match's view of records it may refuse
	var take []bool    // the units of a batch that pass the filters
	for len(res.Records) < maxCount && next < res.MaxOffset && scanned < maxScanUnits {
		var err error
		units, err = q.Read(next, min(maxCount*2, 1024), units[:0])
		if errors.Is(err, consumequeue.ErrNotFound) && len(res.Records) == 0 {
			// Retention moved the min offset past next meanwhile.
			res.MinOffset = q.MinOffset()
			res.Status, res.NextOffset = OffsetTooSmall, res.MinOffset
			return res, nil
		}
		if errors.Is(err, consumequeue.ErrNotFound) {
			break // return what was read; the next pull is moved
		}
		if err != nil {
			return res, fmt.Errorf("store: read %s/%d at %d: %w", topic, queueID, next, err)
		}
		if len(units) == 0 {
			break
		}
		// Have the kernel read what these units point at (and on) into
		// memory, so a cold backlog is read at the disk's pace rather than
		// a page fault at a time; free while the pages are hot. Below the
		// log's page cache window the runs read below bypass the cache
		// (commitlog.Log.ReadSpan), so read-ahead is asked for only if
		// records are left to read one at a time.
		last := units[len(units)-1]
		prefetch := func() {
			if last.Offset >= minPhys {
				s.clog.Prefetch(max(units[0].Offset, minPhys), last.Offset+int64(last.Size))
			}
		}
		cold := match == nil && last.Offset+int64(last.Size) <= s.clog.CacheFrom()
		if !cold {
			prefetch()
		}
		// The records of these units are copied into one slab: one
		// allocation per batch of units, not one per record. Each record
		// is capped, so appending to one never writes over the next.
		// Runs of them that lie one after another in the log are read with
		// one pread each (readRuns). To plan them, filter is asked about
		// the units here, each once and in order as the loop below would
		// ask (a filter may keep state: the delay levels' stops at the
		// first message not yet due), and the loop uses the answers.
		want := 0
		take = take[:0]
		var slab []byte
		var pre [][]byte
		if match == nil { // match's records are copied one by one, once it takes them
			planned, n := 0, len(res.Records)
			for _, u := range units {
				t := u.Offset >= minPhys && (filter == nil || filter(u.TagHash))
				take = append(take, t)
				if !t {
					planned++
					continue
				}
				if n > 0 && bytes+want+int(u.Size) > maxBytes {
					break // the loop below stops at this unit too
				}
				planned++
				want += int(u.Size)
				if n++; n == maxCount {
					break
				}
			}
			slab, pre = s.readRuns(units[:planned], take[:planned], make([]byte, 0, want))
		}
		if cold && len(slab) < want {
			prefetch()
		}
		done := false
		for i, u := range units {
			qo := next + int64(i)
			scanned++
			if i < len(take) {
				if !take[i] {
					continue // deleted by retention, or filtered out
				}
			} else if u.Offset < minPhys {
				continue // its segment was deleted by retention
			} else if filter != nil && !filter(u.TagHash) {
				continue
			}
			if len(res.Records) > 0 && bytes+int(u.Size) > maxBytes {
				next = qo
				done = true
				break
			}
			var rec []byte
			if match != nil {
				scratch, err = s.clog.ReadRecord(u.Offset, scratch[:0])
			} else if i < len(pre) && pre[i] != nil {
				rec = pre[i]
			} else {
				at := len(slab)
				if slab, err = s.clog.ReadRecord(u.Offset, slab); err == nil {
					rec = slab[at:len(slab):len(slab)]
				}
			}
			if err != nil && u.Offset < s.clog.MinOffset() {
				continue // retention deleted its segment since minPhys was read
			}
			if err != nil {
				return res, fmt.Errorf("store: read record of %s/%d@%d at %d: %w", topic, queueID, qo, u.Offset, err)
			}
			if match != nil {
				if !match(scratch) {
					continue
				}
				rec = append(make([]byte, 0, len(scratch)), scratch...)
			}
			res.Records = append(res.Records, rec)
			res.QueueOffsets = append(res.QueueOffsets, qo)
			bytes += len(rec)
			if len(res.Records) == maxCount {
				next = qo + 1
				done = true
				break
			}
		}
		if done {
			break
		}
		next += int64(len(units))
	}
	res.NextOffset = next
	if len(res.Records) > 0 {
		res.Status = Found
	} else {
		res.Status = NoMatchedMessage
	}
	return res, nil
}

// runMin is the least a run of records must hold for readRuns to read it
// with one pread: below it, the mapping (whose pages a short run may share
// with records read just before) costs less than a system call.
const runMin = 8 << 10

// readRuns reads into slab the records of the units marked in take that
// lie one after another in the log (each starts where the one before it
// ends), one pread per run of at least runMin bytes
// (commitlog.Log.ReadSpan). pre[i] is unit i's record, capped, when it was
// read so and its header agrees with its unit; nil otherwise, for the
// caller to read on its own (pre is nil when no run was read: the pulls
// at the tail, a record or two, allocate nothing here). The slab's length
// is the bytes the runs filled.
func (s *Store) readRuns(units []consumequeue.Unit, take []bool, slab []byte) ([]byte, [][]byte) {
	var pre [][]byte
	for i := 0; i < len(units); {
		if !take[i] {
			i++
			continue
		}
		j, end := i+1, units[i].Offset+int64(units[i].Size)
		for j < len(units) && take[j] && units[j].Offset == end {
			end += int64(units[j].Size)
			j++
		}
		start := units[i].Offset
		if n := int(end - start); j-i > 1 && n >= runMin && cap(slab)-len(slab) >= n {
			at := len(slab)
			span := slab[at : at+n]
			if err := s.clog.ReadSpan(start, span); err == nil {
				slab = slab[:at+n]
				if pre == nil {
					pre = make([][]byte, len(units))
				}
				for k := i; k < j; k++ {
					lo := int(units[k].Offset - start)
					hi := lo + int(units[k].Size)
					h, _ := message.PeekHeader(span[lo:])
					if h.IsRecord() && int(h.TotalSize) == int(units[k].Size) {
						pre[k] = span[lo:hi:hi]
					}
				}
			}
		}
		i = j
	}
	return slab, pre
}

// ReadRecord returns a copy of the record at a CommitLog offset.
func (s *Store) ReadRecord(phyOffset int64) ([]byte, error) {
	return s.clog.ReadRecord(phyOffset, nil)
}

// ReadMessage decodes the message at a CommitLog offset (read as
// ReadMessages reads one).
func (s *Store) ReadMessage(phyOffset int64) (m *message.Ext, err error) {
	s.ReadMessages([]int64{phyOffset}, func(_ int, got *message.Ext, e error) { m, err = got, e })
	return m, err
}

// ReadMessages decodes the messages at CommitLog offsets offs and calls fn
// for each, with its index in offs. Records behind the resident tail are
// read with pread, those close together in one call
// (commitlog.Log.PreadRecords): due timer messages stored together, as in
// a burst, cost one system call per megabyte.
func (s *Store) ReadMessages(offs []int64, fn func(i int, m *message.Ext, err error)) {
	s.ReadRecords(offs, func(i int, rec []byte, err error) {
		if err != nil {
			fn(i, nil, err)
			return
		}
		m, err := message.Decode(rec) // copies what it keeps
		fn(i, m, err)
	})
}

// ErrNotFound reports a lookup that found nothing.
var ErrNotFound = errors.New("store: not found")

// LookupByMsgID finds a message by its offset message id. The id must name
// this store's host.
func (s *Store) LookupByMsgID(id string) (*message.Ext, error) {
	host, off, err := message.ParseOffsetMsgID(id)
	if err != nil {
		return nil, err
	}
	if host != s.opts.StoreHost {
		return nil, fmt.Errorf("%w: %s was stored by %s, this store is %s", ErrNotFound, id, host, s.opts.StoreHost)
	}
	m, err := s.ReadMessage(off)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotFound, id, err)
	}
	return m, nil
}

// QueryByKey finds messages of a topic whose KEYS contain key or whose
// unique id is key, stored between begin and end (ms, inclusive), newest
// first, at most max.
func (s *Store) QueryByKey(topic, key string, begin, end int64, max int) ([]*message.Ext, error) {
	if s.index == nil {
		return nil, errors.New("store: message index is disabled")
	}
	if max <= 0 {
		max = 32
	}
	// Ask for more than max: hash collisions are filtered out below.
	offs, err := s.index.Query(indexfile.BuildKey(topic, key), begin, end, max*2+8)
	if err != nil {
		return nil, err
	}
	minOff := s.clog.MinOffset()
	var out []*message.Ext
	for _, off := range offs {
		if off < minOff || off >= s.clog.Readable() {
			continue
		}
		m, err := s.ReadMessage(off)
		if err != nil {
			continue
		}
		if m.Topic != topic || (m.UniqueID() != key && !slices.Contains(m.Keys(), key)) {
			continue
		}
		if m.StoreTimestamp < begin || m.StoreTimestamp > end {
			continue
		}
		out = append(out, m)
		if len(out) == max {
			break
		}
	}
	return out, nil
}

// QueueOffsets returns a queue's min and max offsets (both 0 for a queue
// that does not exist).
func (s *Store) QueueOffsets(topic string, queueID int32) (minOff, maxOff int64) {
	q, ok := s.cqs.Lookup(topic, queueID)
	if !ok {
		return 0, 0
	}
	return q.MinOffset(), q.MaxOffset()
}

// StoreTimeAt returns the store timestamp of the message at a queue offset.
func (s *Store) StoreTimeAt(topic string, queueID int32, queueOffset int64) (int64, error) {
	q, ok := s.cqs.Lookup(topic, queueID)
	if !ok {
		return 0, fmt.Errorf("%w: queue %s/%d", ErrNotFound, topic, queueID)
	}
	u, err := q.Get(queueOffset)
	if err != nil {
		return 0, err
	}
	return s.storeTimeOf(u)
}

func (s *Store) storeTimeOf(u consumequeue.Unit) (int64, error) {
	if u.Offset < s.clog.MinOffset() {
		// Deleted by retention: older than anything still stored.
		return 0, fmt.Errorf("record at %d was deleted: %w", u.Offset, consumequeue.ErrNotFound)
	}
	var ts int64
	err := s.clog.View(u.Offset, int(u.Size), func(b []byte) error {
		if len(b) < message.PosSysFlag+4 {
			return message.ErrCorrupt
		}
		sysFlag := int32(binary.BigEndian.Uint32(b[message.PosSysFlag:]))
		p := message.StoreTimestampPos(sysFlag)
		if len(b) < p+8 {
			return message.ErrCorrupt
		}
		ts = int64(binary.BigEndian.Uint64(b[p:]))
		return nil
	})
	return ts, err
}

// offsetForTimeWait bounds how long OffsetForTime waits for dispatch.
const offsetForTimeWait = time.Second

// OffsetForTime returns the first queue offset whose message was stored at
// or after ts (ms); the max offset if none. It first lets dispatch catch up
// (up to a second) with everything acknowledged so far, so a message stored
// before ts but not yet in its ConsumeQueue cannot be mistaken for the
// queue's end.
func (s *Store) OffsetForTime(topic string, queueID int32, ts int64) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), offsetForTimeWait)
	_ = s.WaitDispatched(ctx, s.clog.Readable())
	cancel()
	q, ok := s.cqs.Lookup(topic, queueID)
	if !ok {
		return 0, nil
	}
	return q.OffsetForTime(ts, s.storeTimeOf)
}

// QueueInfo describes one ConsumeQueue.
type QueueInfo struct {
	Topic                string
	QueueID              int32
	MinOffset, MaxOffset int64
}

// Queues lists every ConsumeQueue.
func (s *Store) Queues() []QueueInfo {
	qs := s.cqs.Queues()
	out := make([]QueueInfo, len(qs))
	for i, q := range qs {
		out[i] = QueueInfo{Topic: q.Topic(), QueueID: q.ID(), MinOffset: q.MinOffset(), MaxOffset: q.MaxOffset()}
	}
	return out
}

// DeleteTopic removes a topic's queues. Its records stay in the CommitLog
// until retention removes them.
func (s *Store) DeleteTopic(topic string) error {
	s.clog.DeleteQueueOffsets(topic)
	return s.cqs.DeleteTopic(topic)
}
