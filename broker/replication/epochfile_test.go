package replication

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/bolide-mq/bolide/ha"
)

func TestEpochFileMissingIsEmpty(t *testing.T) {
	dir := t.TempDir()
	f, err := loadEpochFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Entries(); len(got) != 0 {
		t.Fatalf("entries of a new file: %v", got)
	}
	if _, ok := f.Last(); ok {
		t.Fatal("Last of an empty list is ok")
	}
	if f.Path() != filepath.Join(dir, "config", "epochs") {
		t.Fatalf("path %s", f.Path())
	}
	if _, err := os.Stat(f.Path()); !os.IsNotExist(err) {
		t.Fatalf("loading created the file: %v", err)
	}
}

func TestEpochFileAppendReplaceTruncatePersist(t *testing.T) {
	dir := t.TempDir()
	f, err := loadEpochFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	big := int64(5) << 32 // offsets above 4 GiB survive the text form
	steps := []ha.EpochEntry{{Epoch: 1, Start: 0}, {Epoch: 2, Start: 4096}, {Epoch: 5, Start: 4096}, {Epoch: 7, Start: big}}
	for _, e := range steps {
		if err := f.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	reload := func() []ha.EpochEntry {
		t.Helper()
		g, err := loadEpochFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		return g.Entries()
	}
	if got := reload(); !reflect.DeepEqual(got, steps) {
		t.Fatalf("reloaded %v, want %v", got, steps)
	}
	// Out of order appends are refused and change nothing.
	for _, bad := range []ha.EpochEntry{{Epoch: 7, Start: big + 1}, {Epoch: 8, Start: big - 1}, {Epoch: -1, Start: 0}} {
		if err := f.Append(bad); err == nil {
			t.Fatalf("append %v accepted", bad)
		}
	}
	if got := reload(); !reflect.DeepEqual(got, steps) {
		t.Fatalf("after refused appends: %v", got)
	}
	// TruncateTo keeps entries starting at or below the cut.
	if err := f.TruncateTo(4096); err != nil {
		t.Fatal(err)
	}
	want := steps[:3]
	if got := f.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after TruncateTo(4096): %v", got)
	}
	if got := reload(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reloaded after truncate: %v", got)
	}
	if err := f.TruncateTo(4095); err != nil {
		t.Fatal(err)
	}
	if got := reload(); !reflect.DeepEqual(got, steps[:1]) {
		t.Fatalf("after TruncateTo(4095): %v", got)
	}
	// Replace takes a master's list whole; an invalid one is refused.
	master := []ha.EpochEntry{{Epoch: 3, Start: 0}, {Epoch: 9, Start: 100}}
	if err := f.Replace(master); err != nil {
		t.Fatal(err)
	}
	if err := f.Replace([]ha.EpochEntry{{Epoch: 3, Start: 10}, {Epoch: 2, Start: 20}}); err == nil {
		t.Fatal("invalid replace accepted")
	}
	if got := reload(); !reflect.DeepEqual(got, master) {
		t.Fatalf("after replace: %v", got)
	}
	if err := f.Replace(nil); err != nil {
		t.Fatal(err)
	}
	if got := reload(); len(got) != 0 {
		t.Fatalf("after replace with nothing: %v", got)
	}
	// Entries returns a copy.
	if err := f.Append(ha.EpochEntry{Epoch: 10, Start: 0}); err != nil {
		t.Fatal(err)
	}
	f.Entries()[0].Epoch = 99
	if e, _ := f.Last(); e.Epoch != 10 {
		t.Fatalf("Entries aliased the list: %v", e)
	}
	// No temporary file is left behind.
	names, err := os.ReadDir(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0].Name() != "epochs" {
		var got []string
		for _, n := range names {
			got = append(got, n.Name())
		}
		t.Fatalf("config holds %v", got)
	}
}

func TestEpochFileFormat(t *testing.T) {
	got := string(encodeEpochs([]ha.EpochEntry{{Epoch: 1, Start: 0}, {Epoch: 2, Start: 1 << 33}}))
	want := "bolide-epochs 1 2 "
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "\n1 0\n2 8589934592\n") {
		t.Fatalf("encoded %q", got)
	}
	if got := string(encodeEpochs(nil)); got != "bolide-epochs 1 0 00000000\n" {
		t.Fatalf("empty list encoded %q", got)
	}
}

func TestEpochFileCorrupt(t *testing.T) {
	good := string(encodeEpochs([]ha.EpochEntry{{Epoch: 1, Start: 0}, {Epoch: 2, Start: 500}}))
	hdr, body, _ := strings.Cut(good, "\n")
	cases := map[string]string{
		"empty":         "",
		"no newline":    hdr,
		"bad magic":     strings.Replace(good, "bolide-epochs", "bolide-epoch", 1),
		"version":       strings.Replace(good, "bolide-epochs 1", "bolide-epochs 2", 1),
		"flipped digit": hdr + "\n" + strings.Replace(body, "500", "501", 1),
		"lost line":     hdr + "\n" + body[:strings.Index(body, "\n")+1],
		"count":         strings.Replace(hdr, " 2 ", " 3 ", 1) + "\n" + body,
		"torn tail":     good[:len(good)-1],
		"invalid order": fixCRC(t, "2 500\n1 600\n"),
		"three fields":  fixCRC(t, "1 0 0\n"),
		"not numbers":   fixCRC(t, "one 0\n"),
	}
	// The helper itself makes a file that loads when its lines are good.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config", "epochs"), []byte(fixCRC(t, "1 0\n4 70\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := loadEpochFile(dir); err != nil || !reflect.DeepEqual(f.Entries(), []ha.EpochEntry{{Epoch: 1, Start: 0}, {Epoch: 4, Start: 70}}) {
		t.Fatalf("control file: %v", err)
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config", "epochs")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := loadEpochFile(dir)
			if err == nil {
				t.Fatalf("loaded %q", content)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
}

// fixCRC returns a file whose header is right for body (count and CRC),
// whatever its lines say.
func fixCRC(t *testing.T, body string) string {
	t.Helper()
	return fmt.Sprintf("bolide-epochs 1 %d %08x\n%s", strings.Count(body, "\n"), crc32.ChecksumIEEE([]byte(body)), body)
}

func TestEpochFileConcurrent(t *testing.T) {
	f, err := loadEpochFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				last, _ := f.Last()
				_ = f.Append(ha.EpochEntry{Epoch: last.Epoch + 1, Start: last.Start + 10})
				_ = f.Entries()
			}
		}()
	}
	wg.Wait()
	if err := ha.ValidateEpochs(f.Entries()); err != nil {
		t.Fatal(err)
	}
}

// A lagging slave holds its master's entries, one of which may start beyond
// its own end; taking over, it cuts them at its end before appending its
// own epoch (as becomeMasterLocked and Promote do).
func TestEpochFileTakeOverBehindCopiedEntry(t *testing.T) {
	f, err := loadEpochFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Replace([]ha.EpochEntry{{Epoch: 1, Start: 0}, {Epoch: 2, Start: 500}}); err != nil {
		t.Fatal(err)
	}
	const end = 300
	if err := f.Append(ha.EpochEntry{Epoch: 3, Start: end}); err == nil {
		t.Fatal("an entry below a copied one was appended")
	}
	if err := f.TruncateTo(end); err != nil {
		t.Fatal(err)
	}
	if err := f.Append(ha.EpochEntry{Epoch: 3, Start: end}); err != nil {
		t.Fatalf("append after the cut: %v", err)
	}
	if got, want := f.Entries(), []ha.EpochEntry{{Epoch: 1, Start: 0}, {Epoch: 3, Start: end}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
}
