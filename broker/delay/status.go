package delay

// Status describes the timing wheel.
type Status struct {
	// IndexedOffset is how far the timer queue is indexed.
	IndexedOffset int64
	// Pending approximates the timer messages neither delivered nor
	// cancelled: entries of bucket files not loaded plus open entries of
	// loaded ones (copies from retries or crashes count twice until their
	// bucket is loaded).
	Pending int64
	// Buckets is the number of bucket files; LoadedBuckets and
	// LoadedEntries describe the in-memory wheel.
	Buckets, LoadedBuckets, LoadedEntries int64
	// Delivered, Cancelled and Lost count since the engine started;
	// Skipped counts the due messages not delivered because a master this
	// engine took progress from had delivered them (Engine.Inherit).
	Delivered, Cancelled, Lost, Skipped int64
	// Active: the engine delivers (the broker is the master); otherwise it
	// stands by.
	Active bool
	// NextDueMS is the due time of the next loaded entry (0: none).
	NextDueMS int64
	// IndexBytes is the size of the bucket files.
	IndexBytes int64
	// Cancels is the number of cancellations remembered.
	Cancels int
}

// Status reports the engine's state.
func (e *Engine) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Status{
		IndexedOffset: e.qoff,
		Buckets:       int64(len(e.files.m)),
		LoadedBuckets: int64(len(e.loaded)),
		Delivered:     e.delivered.Load(),
		Cancelled:     e.cancelled.Load(),
		Lost:          e.lost.Load(),
		Skipped:       e.skipped.Load(),
		Active:        e.active,
		IndexBytes:    e.files.bytes,
		Cancels:       len(e.cancels),
	}
	for _, bf := range e.files.m {
		if bf.lb == nil {
			st.Pending += bf.n
		}
	}
	for _, lb := range e.loaded {
		st.Pending += int64(lb.open)
		st.LoadedEntries += int64(lb.ents.len())
		if st.NextDueMS == 0 {
			if i, _, ok := lb.peek(); ok {
				st.NextDueMS = lb.ents.at(i).deliverMS
			}
		}
	}
	return st
}

// Settled reports whether the engine has caught up with its clock: the
// timer queue is indexed to its end, the buckets are loaded for the
// current time, and nothing due is waiting or being delivered. Tests with
// a virtual clock advance it only when the engine is settled.
func (e *Engine) Settled() bool {
	now := e.clock.Now().UnixMilli()
	end := e.host.TimerQueueMaxOffset()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.qoff < end || floorTo(now, granularity[0]) > e.frontier || e.inflight > 0 {
		return false
	}
	for _, lb := range e.loaded {
		if i, _, ok := lb.peek(); ok {
			return lb.ents.at(i).deliverMS > now
		}
	}
	return true
}
