package daemon

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// docMarkers are the HTML comments around a daemon's table in
// docs/config.md.
func docMarkers(name string) (begin, end string) {
	return "<!-- begin " + name + " settings (generated from the flags) -->\n",
		"<!-- end " + name + " settings -->"
}

// ErrDocStale is returned by SyncDocTable when the document's table is not
// the one the flags give.
var ErrDocStale = errors.New("config doc out of date")

// SyncDocTable checks that the document at path holds table between the
// markers of the daemon name; with update it rewrites that part instead.
// Tests call it so that a new flag cannot go undocumented.
func SyncDocTable(path, name, table string, update bool) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config doc: %w", err)
	}
	doc := string(raw)
	begin, end := docMarkers(name)
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return fmt.Errorf("config doc %s: no %q ... %q section", path, strings.TrimSpace(begin), end)
	}
	cur := doc[i+len(begin) : j]
	if cur == table {
		return nil
	}
	if !update {
		return fmt.Errorf("%w: %s: the %s table differs from its flags", ErrDocStale, path, name)
	}
	doc = doc[:i+len(begin)] + table + doc[j:]
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("config doc: %w", err)
	}
	return nil
}
