package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// The reserve is a directory of preallocated, all-zero spare files, one
// kind per file size: full-size ConsumeQueue files, first (small)
// ConsumeQueue files and IndexFiles. The ConsumeQueues and the index create
// their files as usual and take a spare (a rename) only when the disk has
// no room for a new file, so the spares sit unused until the disk is full.
// A ConsumeQueue file between the two sizes takes a full-size spare, cut
// to its size after the rename. See doc.go, "Full disk".

// spareKind names the kinds of spare files.
type spareKind int

const (
	spareQueue      spareKind = iota // a full-size ConsumeQueue file
	spareQueueSmall                  // a queue's first ConsumeQueue file
	spareIndex
	spareKinds
)

var spareNames = [spareKinds]string{"consumequeue", "cqfirst", "index"}

func (k spareKind) String() string { return spareNames[k] }

// reserve manages the spare files under <dir>/reserve.
type reserve struct {
	dir    string
	log    *zap.Logger
	size   [spareKinds]int64 // 0: the kind is not used
	target [spareKinds]int

	mu     sync.Mutex
	spares [spareKinds][]string // paths, oldest first
	seq    int
	count  [spareKinds]atomic.Int64

	taken chan struct{} // a spare was taken: the keeper should replace it
}

// openReserve lists the spare files under dir, removing those of the wrong
// size (the options changed) and leftovers of an interrupted creation.
func openReserve(dir string, size [spareKinds]int64, target [spareKinds]int, log *zap.Logger) (*reserve, error) {
	r := &reserve{dir: dir, log: log, size: size, target: target, taken: make(chan struct{}, 1)}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: reserve: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store: reserve: %w", err)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		kind, seq, ok := parseSpareName(e.Name())
		var st os.FileInfo
		if ok && e.Type().IsRegular() {
			st, err = e.Info()
		}
		if !ok || st == nil || err != nil || r.size[kind] == 0 || st.Size() != r.size[kind] {
			log.Info("removing unusable reserve file", zap.String("file", path))
			if err := os.RemoveAll(path); err != nil {
				return nil, fmt.Errorf("store: reserve: %w", err)
			}
			continue
		}
		r.spares[kind] = append(r.spares[kind], path)
		r.count[kind].Add(1)
		r.seq = max(r.seq, seq+1)
	}
	return r, nil
}

func spareName(kind spareKind, seq int) string {
	return fmt.Sprintf("%s-%d", kind, seq)
}

func parseSpareName(name string) (spareKind, int, bool) {
	for k := spareKind(0); k < spareKinds; k++ {
		if rest, ok := strings.CutPrefix(name, k.String()+"-"); ok {
			seq, err := strconv.Atoi(rest)
			return k, seq, err == nil && seq >= 0
		}
	}
	return 0, 0, false
}

// ready returns how many spare files of kind are ready.
func (r *reserve) ready(kind spareKind) int64 { return r.count[kind].Load() }

// add preallocates n more spare files of kind. They are made durable
// before they count, so a crash cannot leave a short spare; all n share one
// sync of the directory (and, on a journalling file system, mostly one
// commit), so a burst of new queues adds its spares in batches.
func (r *reserve) add(kind spareKind, n int) error {
	if n <= 0 {
		return nil
	}
	r.mu.Lock()
	seq := r.seq
	r.seq += n
	r.mu.Unlock()
	var made []string
	cleanup := func(err error) error {
		for i := range n {
			_ = os.Remove(filepath.Join(r.dir, ".tmp-"+spareName(kind, seq+i)))
		}
		for _, p := range made {
			_ = os.Remove(p)
		}
		return fmt.Errorf("store: reserve %s file: %w", kind, err)
	}
	files := make([]*os.File, 0, n)
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	for i := range n {
		f, err := os.OpenFile(filepath.Join(r.dir, ".tmp-"+spareName(kind, seq+i)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return cleanup(err)
		}
		files = append(files, f)
		if err := fsutil.Preallocate(f, r.size[kind]); err != nil {
			return cleanup(err)
		}
	}
	for _, f := range files {
		if err := fsutil.Fdatasync(f); err != nil {
			return cleanup(err)
		}
	}
	for i := range n {
		path := filepath.Join(r.dir, spareName(kind, seq+i))
		if err := os.Rename(filepath.Join(r.dir, ".tmp-"+spareName(kind, seq+i)), path); err != nil {
			return cleanup(err)
		}
		made = append(made, path)
	}
	if err := fsutil.SyncDir(r.dir); err != nil {
		return cleanup(err)
	}
	r.mu.Lock()
	r.spares[kind] = append(r.spares[kind], made...)
	r.count[kind].Add(int64(n))
	r.mu.Unlock()
	return nil
}

// fill adds spares until every kind has its target.
func (r *reserve) fill() error {
	for k := spareKind(0); k < spareKinds; k++ {
		if r.size[k] > 0 {
			if err := r.add(k, r.target[k]-int(r.count[k].Load())); err != nil {
				return err
			}
		}
	}
	return nil
}

// full reports whether every kind has its target.
func (r *reserve) full() bool {
	for k := spareKind(0); k < spareKinds; k++ {
		if r.size[k] > 0 && r.count[k].Load() < int64(r.target[k]) {
			return false
		}
	}
	return true
}

// trim removes the newest spares of kind beyond keep (never going below
// the kind's target) and returns how many it removed. The caller makes
// sure that the planner does not count on them.
func (r *reserve) trim(kind spareKind, keep int) int {
	keep = max(keep, r.target[kind])
	r.mu.Lock()
	var drop []string
	if len(r.spares[kind]) > keep {
		drop = append(drop, r.spares[kind][keep:]...)
		r.spares[kind] = r.spares[kind][:keep]
		r.count[kind].Add(-int64(len(drop)))
	}
	r.mu.Unlock()
	for _, path := range drop {
		// A crash before the removal leaves one spare too many, which the
		// next trim removes.
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			r.log.Warn("reserve: a surplus spare file could not be removed", zap.String("file", path), zap.Error(err))
		}
	}
	return len(drop)
}

// take moves a spare file of kind to path and opens it: the ConsumeQueues'
// and the index's Spare hook. A spare larger than size is cut to size.
func (r *reserve) take(kind spareKind, path string, size int64) (*os.File, error) {
	if size > r.size[kind] {
		return nil, fmt.Errorf("store: reserve holds %d-byte %s files, %d asked", r.size[kind], kind, size)
	}
	r.mu.Lock()
	n := len(r.spares[kind])
	if n == 0 {
		r.mu.Unlock()
		return nil, fmt.Errorf("store: reserve: no spare %s file left", kind)
	}
	spare := r.spares[kind][n-1]
	r.spares[kind] = r.spares[kind][:n-1]
	r.count[kind].Add(-1)
	r.mu.Unlock()
	select {
	case r.taken <- struct{}{}:
	default:
	}
	if err := os.Rename(spare, path); err != nil {
		return nil, fmt.Errorf("store: reserve: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("store: reserve: %w", err)
	}
	if size < r.size[kind] {
		if err := f.Truncate(size); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("store: reserve: %w", err)
		}
	}
	r.log.Warn("disk full: took a file from the reserve", zap.Stringer("kind", kind), zap.String("file", path),
		zap.Int64("sparesLeft", r.count[kind].Load()))
	return f, nil
}

// queueSpares says whether planned new ConsumeQueue files, big (larger
// than a first file) and small, each have a spare: a big file needs a
// full-size spare, a small one either kind. It returns the kind to add when
// they do not, and false when they do.
func (r *reserve) queueSpares(big, small int64) (spareKind, bool) {
	full, first := r.ready(spareQueue), int64(0)
	if r.size[spareQueueSmall] > 0 {
		first = r.ready(spareQueueSmall)
	}
	switch {
	case big > full:
		return spareQueue, true
	case big+small > full+first:
		if r.size[spareQueueSmall] > 0 {
			return spareQueueSmall, true
		}
		return spareQueue, true
	}
	return 0, false
}

// takeQueue takes a spare for a ConsumeQueue file of size bytes: a first
// file's spare when it fits and one is left, else a full-size one.
func (r *reserve) takeQueue(path string, size int64) (*os.File, spareKind, error) {
	kind := spareQueue
	if size <= r.size[spareQueueSmall] && r.ready(spareQueueSmall) > 0 {
		kind = spareQueueSmall
	}
	f, err := r.take(kind, path, size)
	return f, kind, err
}
