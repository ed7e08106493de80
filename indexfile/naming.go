package indexfile

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"
)

// nameLen is the length of an index file name, yyyyMMddHHmmssSSS.
const nameLen = 17

const nameLayout = "20060102150405" // the yyyyMMddHHmmss part

// FileName returns the name RocketMQ gives an index file created at t:
// yyyyMMddHHmmssSSS in local time.
func FileName(t time.Time) string {
	t = t.Local()
	return t.Format(nameLayout) + fmt.Sprintf("%03d", t.Nanosecond()/int(time.Millisecond))
}

// parseFileName is the inverse of FileName.
func parseFileName(name string) (time.Time, bool) {
	if len(name) != nameLen {
		return time.Time{}, false
	}
	for i := 0; i < nameLen; i++ {
		if name[i] < '0' || name[i] > '9' {
			return time.Time{}, false
		}
	}
	t, err := time.ParseInLocation(nameLayout, name[:14], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	ms, _ := strconv.Atoi(name[14:])
	return t.Add(time.Duration(ms) * time.Millisecond), true
}

// nextFileName names a file created now so that it sorts after last (the
// newest existing name, or ""): the current time, or last plus 1 ms when the
// clock has not moved past it (same millisecond, or stepped back).
func nextFileName(now time.Time, last string) (string, error) {
	name := FileName(now)
	if last == "" || name > last {
		return name, nil
	}
	t, ok := parseFileName(last)
	if !ok {
		return "", fmt.Errorf("next index file name after %q: not a valid name", last)
	}
	// Local-time names can repeat around DST changes; step until sorted.
	for i := 0; i < 4*3600*1000; i++ {
		t = t.Add(time.Millisecond)
		if name = FileName(t); name > last {
			return name, nil
		}
	}
	return "", fmt.Errorf("next index file name after %q: no later name", last)
}

// listFiles returns the index file names in root, oldest first. Entries that
// are not index file names are ignored.
func listFiles(root string) (names, ignored []string, err error) {
	des, err := os.ReadDir(root)
	if err != nil {
		return nil, nil, fmt.Errorf("list index files in %s: %w", root, err)
	}
	for _, de := range des {
		if _, ok := parseFileName(de.Name()); ok && de.Type().IsRegular() {
			names = append(names, de.Name())
		} else {
			ignored = append(ignored, de.Name())
		}
	}
	sort.Strings(names)
	return names, ignored, nil
}
