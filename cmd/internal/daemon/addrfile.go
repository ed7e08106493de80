package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// WriteAddrFile writes addr and a newline to path atomically (a reader
// never sees a partial address), for scripts and tests that start a daemon
// on port 0 and wait for the file to appear.
func WriteAddrFile(path, addr string) error {
	if err := fsutil.WriteFileAtomic(path, []byte(addr+"\n"), 0o644); err != nil {
		return fmt.Errorf("addr file: %w", err)
	}
	return nil
}

// RemoveAddrFile removes an address file; a missing file is not an error.
// Daemons remove a stale file before they bind and theirs when they stop.
func RemoveAddrFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("addr file: %w", err)
	}
	return nil
}
