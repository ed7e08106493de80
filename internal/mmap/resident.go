package mmap

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ResidentUnder returns how many bytes of this process's mappings of files
// under dir are resident (the sum of their Rss in /proc/self/smaps).
func ResidentUnder(dir string) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("resident mappings: %w", err)
	}
	defer f.Close()
	var total int64
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") {
			// A mapping's header: address range, perms, offset, device,
			// inode, path.
			in = len(fields) >= 6 && strings.HasPrefix(fields[5], dir)
			continue
		}
		if in && fields[0] == "Rss:" && len(fields) >= 2 {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("resident mappings: %q: %w", sc.Text(), err)
			}
			total += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("resident mappings: %w", err)
	}
	return total, nil
}
