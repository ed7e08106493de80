package replication

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
)

func TestRoleStateSavedAndRestored(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	log := zap.NewNop()
	s, err := loadRoleState(dir, 1, log)
	if err != nil {
		t.Fatal(err)
	}
	if s.role() != RoleSlave || s.id() != 1 || s.epoch() != 0 {
		t.Fatalf("fresh slave: %s id %d epoch %d", s.role(), s.id(), s.epoch())
	}
	changed := s.changes()
	if err := s.set(RoleMaster, 0, 3); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("a promotion did not signal a change")
	}
	if err := s.sawEpoch(2); err != nil || s.epoch() != 3 {
		t.Fatalf("a lower epoch seen: epoch %d (%v)", s.epoch(), err)
	}

	// The same configuration restores the saved role.
	again, err := loadRoleState(dir, 1, log)
	if err != nil {
		t.Fatal(err)
	}
	if again.role() != RoleMaster || again.id() != 0 || again.epoch() != 3 {
		t.Fatalf("restored: %s id %d epoch %d", again.role(), again.id(), again.epoch())
	}
	// Another configured id wins over the file; the epoch stays.
	other, err := loadRoleState(dir, 2, log)
	if err != nil {
		t.Fatal(err)
	}
	if other.role() != RoleSlave || other.id() != 2 || other.epoch() != 3 {
		t.Fatalf("reconfigured: %s id %d epoch %d", other.role(), other.id(), other.epoch())
	}
}

func TestRoleFileInconsistent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config", "ha.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"configuredBrokerId":0,"brokerId":0,"role":"SLAVE","epoch":1}`, // a slave with id 0
		`{"configuredBrokerId":0,"brokerId":0,"role":"LEADER","epoch":1}`,
		`{"configuredBrokerId":0,"brokerId":0,"role":"MASTER","epoch":-1}`,
		`not json`,
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadRoleState(dir, 0, zap.NewNop()); err == nil {
			t.Errorf("%s accepted", body)
		}
	}
}
