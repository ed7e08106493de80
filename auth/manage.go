package auth

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/bolide-mq/bolide/internal/errcode"
)

// File is the path of the ACL file ("" when none is configured).
func (g *Guard) File() string {
	if g == nil {
		return ""
	}
	return g.cfg.File
}

// Accounts lists the file's accounts by access key, secrets blanked.
func (g *Guard) Accounts() ([]Account, error) {
	f, err := g.readForManage()
	if err != nil {
		return nil, err
	}
	out := make([]Account, len(f.Accounts))
	for i, a := range f.Accounts {
		a.SecretKey = ""
		out[i] = a
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AccessKey < out[j].AccessKey })
	return out, nil
}

// PutUser creates or replaces an account in the file and applies it at
// once. Without a secret key an existing account keeps its own (a change
// of permissions only); a new one needs one.
func (g *Guard) PutUser(a Account) error {
	return g.modify(func(f *File) error {
		if a.SecretKey == "" {
			for _, old := range f.Accounts {
				if old.AccessKey == a.AccessKey {
					a.SecretKey = old.SecretKey
				}
			}
			if a.SecretKey == "" {
				return errcode.Errorf(errcode.InvalidParameter, "user %s is new: it needs a secret key", a.AccessKey)
			}
		}
		f.Put(a)
		return nil
	})
}

// DeleteUser removes an account from the file and applies it at once.
func (g *Guard) DeleteUser(accessKey string) error {
	return g.modify(func(f *File) error {
		if !f.Delete(accessKey) {
			return errcode.Errorf(errcode.InvalidParameter, "no user with access key %s", accessKey)
		}
		return nil
	})
}

func (g *Guard) readForManage() (*File, error) {
	if g == nil || g.cfg.File == "" {
		return nil, errcode.Errorf(errcode.RequestNotSupported, "this daemon has no ACL file (--acl-file)")
	}
	f, err := ReadFile(g.cfg.File)
	if errors.Is(err, os.ErrNotExist) {
		return &File{}, nil
	}
	return f, err
}

func (g *Guard) modify(change func(*File) error) error {
	if g == nil || g.cfg.File == "" {
		return errcode.Errorf(errcode.RequestNotSupported, "this daemon has no ACL file (--acl-file)")
	}
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	f, err := g.readForManage()
	if err != nil {
		return err
	}
	if err := change(f); err != nil {
		return err
	}
	t, err := f.Compile()
	if err != nil {
		return errcode.Errorf(errcode.InvalidParameter, "%v", err)
	}
	if g.cfg.Enabled && !hasAdmin(t) {
		return errcode.Errorf(errcode.InvalidParameter, "the change would leave no admin user: ACL is on and nobody could administer this daemon")
	}
	if err := WriteFile(g.cfg.File, f); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	info, err := os.Stat(g.cfg.File)
	if err == nil {
		g.stat.Store(&fileStat{info: info})
	}
	g.table.Store(t)
	return nil
}

func hasAdmin(t *Table) bool {
	for _, u := range t.users {
		if u.Admin {
			return true
		}
	}
	return false
}
