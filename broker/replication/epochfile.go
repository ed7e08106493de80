package replication

// The epoch file, <store dir>/config/epochs, holds the broker's epoch
// entries (ha.EpochEntry): where in its CommitLog each master epoch starts.
// A broker appends (E, its CommitLog end) when it becomes master of epoch
// E; a slave replaces its entries with its master's at every HA handshake;
// a truncation of the store drops the entries that start above the cut.
// Two replicas agree on their logs up to the fork point of their entries
// (ha.ForkPoint).
//
// # Format
//
// UTF-8 text, lines ending in '\n'. A header line, then one line per
// entry, oldest first, each two decimal integers separated by one space:
//
//	bolide-epochs 1 <count> <crc>
//	<epoch> <start>
//	<epoch> <start>
//	…
//
// "1" is the format version, <count> the number of entry lines (decimal)
// and <crc> the CRC-32 (IEEE) of every byte after the header line (the
// entry lines with their newlines), as 8 lowercase hex digits. An empty
// list is the header alone ("bolide-epochs 1 0 00000000"); a missing file
// is an empty list. Entries must pass ha.ValidateEpochs (epochs strictly
// increasing, starts non-decreasing, none negative).
//
// The file is replaced whole on every change: written to a temporary file
// in config/, fsynced, renamed over config/epochs, and the directory
// fsynced, so a crash leaves either the old list or the new one. A file
// that does not parse, whose count or CRC does not match, or whose
// entries are invalid is an error naming the file: the broker refuses to
// start rather than guess where its epochs begin.

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/bolide-mq/bolide/ha"
	"github.com/bolide-mq/bolide/internal/fsutil"
)

const (
	epochFileName    = "epochs"
	epochFileMagic   = "bolide-epochs"
	epochFileVersion = 1
)

// epochFile is the broker's epoch entries, kept in memory and on disk.
// Its methods are safe for concurrent use.
type epochFile struct {
	path string

	mu      sync.Mutex
	entries []ha.EpochEntry
}

// loadEpochFile reads <storeDir>/config/epochs (creating config/ if
// needed); a missing file is an empty list.
func loadEpochFile(storeDir string) (*epochFile, error) {
	dir := filepath.Join(storeDir, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("epoch file: %w", err)
	}
	f := &epochFile{path: filepath.Join(dir, epochFileName)}
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("epoch file: %w", err)
	}
	entries, err := decodeEpochs(b)
	if err != nil {
		return nil, fmt.Errorf("epoch file %s is corrupt: %w", f.path, err)
	}
	f.entries = entries
	return f, nil
}

// Path is the file's path.
func (f *epochFile) Path() string { return f.path }

// Entries returns a copy of the entries, oldest first.
func (f *epochFile) Entries() []ha.EpochEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ha.EpochEntry(nil), f.entries...)
}

// Last returns the newest entry; ok is false when there is none.
func (f *epochFile) Last() (e ha.EpochEntry, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.entries) == 0 {
		return ha.EpochEntry{}, false
	}
	return f.entries[len(f.entries)-1], true
}

// Append adds e after the newest entry: its epoch must be higher and its
// start not lower.
func (f *epochFile) Append(e ha.EpochEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := append(append(make([]ha.EpochEntry, 0, len(f.entries)+1), f.entries...), e)
	if err := ha.ValidateEpochs(next); err != nil {
		return fmt.Errorf("epoch file %s: append (%d at %d): %w", f.path, e.Epoch, e.Start, err)
	}
	return f.storeLocked(next)
}

// Replace makes the entries exactly entries (a slave takes its master's).
func (f *epochFile) Replace(entries []ha.EpochEntry) error {
	if err := ha.ValidateEpochs(entries); err != nil {
		return fmt.Errorf("epoch file %s: replace: %w", f.path, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.storeLocked(append([]ha.EpochEntry(nil), entries...))
}

// TruncateTo drops the entries that start above off (the store was cut
// back to off). An entry starting at off is kept.
func (f *epochFile) TruncateTo(off int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.entries)
	for n > 0 && f.entries[n-1].Start > off {
		n--
	}
	if n == len(f.entries) {
		return nil
	}
	return f.storeLocked(append([]ha.EpochEntry(nil), f.entries[:n]...))
}

// storeLocked writes entries durably and then makes them the list in
// memory; on error the list stays as it was (the file may hold either).
func (f *epochFile) storeLocked(entries []ha.EpochEntry) error {
	if err := fsutil.WriteFileAtomic(f.path, encodeEpochs(entries), 0o644); err != nil {
		return fmt.Errorf("epoch file: %w", err)
	}
	f.entries = entries
	return nil
}

// encodeEpochs renders entries in the file format.
func encodeEpochs(entries []ha.EpochEntry) []byte {
	var body []byte
	for _, e := range entries {
		body = strconv.AppendInt(body, e.Epoch, 10)
		body = append(body, ' ')
		body = strconv.AppendInt(body, e.Start, 10)
		body = append(body, '\n')
	}
	out := fmt.Appendf(nil, "%s %d %d %08x\n", epochFileMagic, epochFileVersion, len(entries), crc32.ChecksumIEEE(body))
	return append(out, body...)
}

// decodeEpochs parses the file format and validates the entries.
func decodeEpochs(b []byte) ([]ha.EpochEntry, error) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return nil, errors.New("no header line")
	}
	hdr := strings.Fields(string(b[:nl]))
	body := b[nl+1:]
	if len(hdr) != 4 || hdr[0] != epochFileMagic {
		return nil, fmt.Errorf("bad header %q", b[:nl])
	}
	if v, err := strconv.Atoi(hdr[1]); err != nil || v != epochFileVersion {
		return nil, fmt.Errorf("unknown version %q", hdr[1])
	}
	count, err := strconv.Atoi(hdr[2])
	if err != nil || count < 0 || count > ha.MaxEpochEntries {
		return nil, fmt.Errorf("bad entry count %q", hdr[2])
	}
	want, err := strconv.ParseUint(hdr[3], 16, 32)
	if err != nil || len(hdr[3]) != 8 {
		return nil, fmt.Errorf("bad checksum field %q", hdr[3])
	}
	if got := crc32.ChecksumIEEE(body); uint32(want) != got {
		return nil, fmt.Errorf("checksum %08x, header says %08x", got, want)
	}
	entries := make([]ha.EpochEntry, 0, count)
	for line := 1; len(body) > 0; line++ {
		nl := bytes.IndexByte(body, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("entry line %d has no newline", line)
		}
		fields := strings.Fields(string(body[:nl]))
		body = body[nl+1:]
		if len(fields) != 2 {
			return nil, fmt.Errorf("entry line %d: want \"<epoch> <start>\", got %d fields", line, len(fields))
		}
		epoch, err1 := strconv.ParseInt(fields[0], 10, 64)
		start, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("entry line %d: %w", line, err)
		}
		entries = append(entries, ha.EpochEntry{Epoch: epoch, Start: start})
	}
	if len(entries) != count {
		return nil, fmt.Errorf("%d entry lines, header says %d", len(entries), count)
	}
	if err := ha.ValidateEpochs(entries); err != nil {
		return nil, err
	}
	return entries, nil
}
