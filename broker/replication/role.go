package replication

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/notify"
)

// Role is a broker's part in its group.
type Role int32

const (
	// RoleMaster takes writes (broker id 0).
	RoleMaster Role = iota
	// RoleSlave replicates the master and serves reads (broker id > 0).
	RoleSlave
	// RoleFenced is a master that a NameServer refused because a newer
	// master (higher epoch) registered: it refuses writes.
	RoleFenced
)

func (r Role) String() string {
	switch r {
	case RoleMaster:
		return "MASTER"
	case RoleSlave:
		return "SLAVE"
	case RoleFenced:
		return "FENCED"
	}
	return fmt.Sprintf("Role(%d)", int32(r))
}

func parseRole(s string) (Role, error) {
	for _, r := range []Role{RoleMaster, RoleSlave, RoleFenced} {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown role %q", s)
}

// roleFile is config/ha.json: the broker's role, id and epoch, written on
// every change (promotion, fencing, a higher master epoch seen) so they
// survive restarts. configuredBrokerId is the id the broker was started
// with when it was written: if the configuration now gives another id, the
// operator changed the broker's part on purpose and the file's role and id
// are ignored (its epoch is kept).
type roleFile struct {
	ConfiguredBrokerID int64  `json:"configuredBrokerId"`
	BrokerID           int64  `json:"brokerId"`
	Role               string `json:"role"`
	Epoch              int64  `json:"epoch"`
	UpdatedMs          int64  `json:"updatedMs"`
}

// roleState is the broker's current role, id and epoch. Services that
// follow the role wait on changes.
type roleState struct {
	path       string
	configured int64
	mu         sync.Mutex // serialises writes of the file
	r          atomic.Int32
	brokerID   atomic.Int64
	ep         atomic.Int64
	changed    notify.Signal
}

func loadRoleState(storeDir string, configuredID int64, log *zap.Logger) (*roleState, error) {
	s := &roleState{path: filepath.Join(storeDir, "config", "ha.json"), configured: configuredID}
	role := RoleMaster
	if configuredID != 0 {
		role = RoleSlave
	}
	s.r.Store(int32(role))
	s.brokerID.Store(configuredID)
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("broker: read %s: %w", s.path, err)
	}
	var f roleFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("broker: parse %s: %w", s.path, err)
	}
	fr, err := parseRole(f.Role)
	if err != nil || f.Epoch < 0 || f.BrokerID < 0 || (fr == RoleSlave) != (f.BrokerID != 0) {
		return nil, fmt.Errorf("broker: %s is inconsistent: %+v (%v)", s.path, f, err)
	}
	s.ep.Store(f.Epoch)
	if f.ConfiguredBrokerID != configuredID {
		log.Warn("the configured broker id changed since the replication role was saved; using the configuration",
			zap.String("file", s.path), zap.Int64("savedId", f.BrokerID), zap.String("savedRole", f.Role),
			zap.Int64("configuredId", configuredID), zap.Int64("epoch", f.Epoch))
		return s, nil
	}
	s.r.Store(int32(fr))
	s.brokerID.Store(f.BrokerID)
	if fr != role || f.BrokerID != configuredID {
		log.Warn("replication role restored from the saved state", zap.String("file", s.path),
			zap.String("role", f.Role), zap.Int64("brokerId", f.BrokerID), zap.Int64("epoch", f.Epoch))
	}
	return s, nil
}

func (s *roleState) role() Role   { return Role(s.r.Load()) }
func (s *roleState) id() int64    { return s.brokerID.Load() }
func (s *roleState) epoch() int64 { return s.ep.Load() }

// changes returns a channel closed at the next change of role, id or epoch
// (promotion, fencing): take it, read the role, then wait on it.
func (s *roleState) changes() <-chan struct{} { return s.changed.C() }

// set persists and then takes a new role, id and epoch.
func (s *roleState) set(role Role, id, epoch int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setLocked(role, id, epoch)
}

func (s *roleState) setLocked(role Role, id, epoch int64) error {
	b, err := json.MarshalIndent(roleFile{ConfiguredBrokerID: s.configured, BrokerID: id, Role: role.String(),
		Epoch: epoch, UpdatedMs: time.Now().UnixMilli()}, "", "  ")
	if err != nil {
		return err
	}
	err = fsutil.WriteFileAtomic(s.path, b, 0o644)
	// Take the new state even if it could not be saved: the caller logs the
	// error, and refusing a promotion or a fence half-way helps no one.
	s.ep.Store(epoch)
	s.brokerID.Store(id)
	s.r.Store(int32(role))
	s.changed.Notify()
	return err
}

// sawEpoch raises the epoch to one seen from the master.
func (s *roleState) sawEpoch(e int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e <= s.ep.Load() {
		return nil
	}
	return s.setLocked(s.role(), s.id(), e)
}
