package txn

import (
	"context"
	"sort"
	"time"

	"github.com/bolide-mq/bolide/message"
)

// Stats is the state and counters of the transaction service.
type Stats struct {
	Pending, OldestPendingAgeMS                    int64
	HalfMessages, Checks, ChecksSent, ChecksNoProd int64
	Commits, Rollbacks, Discards                   int64
	Duplicates, Conflicts, UnknownAnswers          int64
	HalfConsumeOffset, HalfMaxOffset               int64
	OpConsumeOffset, OpMaxOffset, DiscardedTotal   int64
}

// Stats reports the service's state and counters.
func (s *Service) Stats() Stats {
	now := time.Now().UnixMilli()
	st := Stats{
		HalfMessages: s.stats.halfMessages.Load(), Checks: s.stats.checks.Load(), ChecksSent: s.stats.checksSent.Load(),
		ChecksNoProd: s.stats.checksNoProducer.Load(), Commits: s.stats.commits.Load(), Rollbacks: s.stats.rollbacks.Load(),
		Discards: s.stats.discards.Load(), Duplicates: s.stats.duplicates.Load(), Conflicts: s.stats.conflicts.Load(),
		UnknownAnswers: s.stats.unknownAnswers.Load(),
	}
	s.mu.Lock()
	st.Pending = int64(len(s.pending))
	for _, t := range s.pending {
		st.OldestPendingAgeMS = max(st.OldestPendingAgeMS, now-t.firstStoreMS)
	}
	st.HalfConsumeOffset, st.OpConsumeOffset = max(s.halfOff, 0), max(s.opOff, 0)
	s.mu.Unlock()
	_, st.HalfMaxOffset = s.host.QueueOffsets(message.TransHalfTopic)
	_, st.OpMaxOffset = s.host.QueueOffsets(message.TransOpHalfTopic)
	_, st.DiscardedTotal = s.host.QueueOffsets(message.TransCheckMaxTopic)
	return st
}

// Pending is a transaction without an outcome.
type Pending struct {
	Topic, Group, ID    string
	QueueID             int32
	CommitLogOffset     int64
	HalfQueueOffset     int64
	CheckTimes          int32
	BornMS, NextCheckMS int64
	FirstStoreMS        int64
}

// Pending lists up to max pending transactions of a group and/or topic
// ("" = any), oldest first, and the total pending. It waits for the state
// to be loaded and refuses when the broker is not a master.
func (s *Service) Pending(ctx context.Context, group, topic string, max int) ([]Pending, int, error) {
	if err := s.waitReady(ctx); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	total := len(s.pending)
	var out []Pending
	for _, t := range s.pending {
		if (group != "" && t.group != group) || (topic != "" && t.topic != topic) {
			continue
		}
		out = append(out, Pending{Topic: t.topic, Group: t.group, ID: t.id, QueueID: t.queueID,
			CommitLogOffset: t.cur.phys, HalfQueueOffset: t.cur.queueOffset, CheckTimes: t.checkTimes,
			BornMS: t.bornMS, NextCheckMS: t.nextCheckMS, FirstStoreMS: t.firstStoreMS})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].FirstStoreMS < out[j].FirstStoreMS })
	if len(out) > max {
		out = out[:max]
	}
	return out, total, nil
}

// Discarded is an entry of TRANS_CHECK_MAX_TIME_TOPIC.
type Discarded struct {
	Msg    *message.Ext
	Record []byte
}

// Discarded reads TRANS_CHECK_MAX_TIME_TOPIC from offset: up to max
// entries of a group and/or topic ("" = any). It returns the entries, the
// offset to continue from and the queue's bounds.
func (s *Service) Discarded(offset int64, max int, group, topic string) (entries []Discarded, next, minOff, maxOff int64, err error) {
	minOff, maxOff = s.host.QueueOffsets(message.TransCheckMaxTopic)
	next = offset
	if next < minOff {
		next = minOff
	}
	for pages := 0; len(entries) < max && next < maxOff && pages < 64; pages++ {
		res, err := s.host.GetMessages(message.TransCheckMaxTopic, next, max-len(entries))
		if err != nil {
			return nil, next, minOff, maxOff, err
		}
		if res.NextOffset <= next {
			break
		}
		for _, rec := range res.Records {
			m, err := message.Decode(rec)
			if err != nil {
				continue
			}
			if (group != "" && m.Properties[message.PropertyProducerGroup] != group) ||
				(topic != "" && m.Properties[message.PropertyRealTopic] != topic) {
				continue
			}
			entries = append(entries, Discarded{Msg: m, Record: rec})
		}
		next = res.NextOffset
	}
	return entries, next, minOff, maxOff, nil
}
