package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// Minimum lengths of keys, as RocketMQ's AclConstants.
const (
	MinAccessKey = 6
	MinSecretKey = 6
)

// File is an ACL file: RocketMQ's plain_acl.yml, read as it is.
type File struct {
	// GlobalWhiteRemoteAddresses let matching addresses skip every check in
	// RocketMQ. Bolide reads them but never lets an address replace
	// authentication: Compile reports them as ignored.
	GlobalWhiteRemoteAddresses []string  `yaml:"globalWhiteRemoteAddresses,omitempty"`
	Accounts                   []Account `yaml:"accounts"`
}

// Account is one user of the file.
type Account struct {
	AccessKey string `yaml:"accessKey"`
	SecretKey string `yaml:"secretKey"`
	// WhiteRemoteAddress narrows where the account may be used from
	// (RocketMQ's formats: 1.2.3.4, 1.2.3.*, 1.2.3.1-100, 1.2.3.{1,2},
	// comma lists, IPv6 addresses). In RocketMQ a match skips the signature
	// check; in Bolide it never does.
	WhiteRemoteAddress string   `yaml:"whiteRemoteAddress,omitempty"`
	Admin              bool     `yaml:"admin"`
	DefaultTopicPerm   string   `yaml:"defaultTopicPerm,omitempty"`
	DefaultGroupPerm   string   `yaml:"defaultGroupPerm,omitempty"`
	TopicPerms         []string `yaml:"topicPerms,omitempty"`
	GroupPerms         []string `yaml:"groupPerms,omitempty"`
}

// ParseFile decodes an ACL file. An empty document is a file with no
// accounts.
func ParseFile(data []byte) (*File, error) {
	f := &File{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(false) // RocketMQ files carry keys Bolide does not use
	if err := dec.Decode(f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("auth: ACL file: %w", err)
	}
	return f, nil
}

// Marshal encodes the file in plain_acl.yml's layout.
func (f *File) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# Bolide ACL file (RocketMQ plain_acl.yml format); reloaded when it changes.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("auth: encode ACL file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("auth: encode ACL file: %w", err)
	}
	return buf.Bytes(), nil
}

// ReadFile reads and parses the ACL file at path.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return ParseFile(data)
}

// WriteFile validates f and writes it to path atomically and durably
// (fsutil.WriteFileAtomic), mode 0600: it holds secrets.
func WriteFile(path string, f *File) error {
	if _, err := f.Compile(); err != nil {
		return err
	}
	data, err := f.Marshal()
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("auth: ACL file: %w", err)
	}
	return nil
}

// Put replaces the account with a's access key, or appends a.
func (f *File) Put(a Account) {
	for i := range f.Accounts {
		if f.Accounts[i].AccessKey == a.AccessKey {
			f.Accounts[i] = a
			return
		}
	}
	f.Accounts = append(f.Accounts, a)
}

// Delete removes the account of accessKey and reports whether there was one.
func (f *File) Delete(accessKey string) bool {
	for i := range f.Accounts {
		if f.Accounts[i].AccessKey == accessKey {
			f.Accounts = append(f.Accounts[:i], f.Accounts[i+1:]...)
			return true
		}
	}
	return false
}

// Table is a compiled ACL file: what the guard consults.
type Table struct {
	users map[string]*User
	// Warnings are the parts of the file Bolide reads but does not honour.
	Warnings []string
}

// User is a compiled account.
type User struct {
	AccessKey string
	secret    []byte
	Admin     bool
	// defaults when no rule matches a resource
	defaultTopic, defaultGroup Perm
	topics, groups             rules
	white                      *whitelist // nil: from anywhere
}

// Compile validates the file and builds its table: keys at least 6
// characters, access keys unique, permissions in RocketMQ's words,
// whitelists in its formats (but never "*", which would mean everyone).
func (f *File) Compile() (*Table, error) {
	t := &Table{users: make(map[string]*User, len(f.Accounts))}
	if len(f.GlobalWhiteRemoteAddresses) > 0 {
		t.Warnings = append(t.Warnings, fmt.Sprintf("globalWhiteRemoteAddresses %v ignored: an address never replaces authentication in Bolide", f.GlobalWhiteRemoteAddresses))
	}
	for i, a := range f.Accounts {
		u, err := compileAccount(a)
		if err != nil {
			return nil, fmt.Errorf("auth: ACL file: account %d (%q): %w", i+1, a.AccessKey, err)
		}
		if _, dup := t.users[u.AccessKey]; dup {
			return nil, fmt.Errorf("auth: ACL file: access key %q appears twice", u.AccessKey)
		}
		t.users[u.AccessKey] = u
	}
	return t, nil
}

func compileAccount(a Account) (*User, error) {
	if len(a.AccessKey) < MinAccessKey {
		return nil, fmt.Errorf("access key shorter than %d characters", MinAccessKey)
	}
	if len(a.SecretKey) < MinSecretKey {
		return nil, fmt.Errorf("secret key shorter than %d characters", MinSecretKey)
	}
	if strings.ContainsAny(a.AccessKey, " ,=/\t\r\n") {
		return nil, errors.New("access key holds a space, comma, '=' or '/'")
	}
	u := &User{AccessKey: a.AccessKey, secret: []byte(a.SecretKey), Admin: a.Admin, defaultTopic: Deny, defaultGroup: Deny}
	var err error
	if a.DefaultTopicPerm != "" {
		if u.defaultTopic, err = ParsePerm(a.DefaultTopicPerm); err != nil {
			return nil, fmt.Errorf("defaultTopicPerm: %w", err)
		}
	}
	if a.DefaultGroupPerm != "" {
		if u.defaultGroup, err = ParsePerm(a.DefaultGroupPerm); err != nil {
			return nil, fmt.Errorf("defaultGroupPerm: %w", err)
		}
	}
	if u.topics, err = compileRules(a.TopicPerms, false); err != nil {
		return nil, fmt.Errorf("topicPerms: %w", err)
	}
	if u.groups, err = compileRules(a.GroupPerms, true); err != nil {
		return nil, fmt.Errorf("groupPerms: %w", err)
	}
	if strings.TrimSpace(a.WhiteRemoteAddress) != "" {
		if u.white, err = parseWhitelist(a.WhiteRemoteAddress); err != nil {
			return nil, fmt.Errorf("whiteRemoteAddress: %w", err)
		}
	}
	return u, nil
}

// rule is one "name=PERM" entry; a name ending in * is a prefix.
type rule struct {
	name   string
	prefix bool
	perm   Perm
}

type rules []rule

func compileRules(entries []string, group bool) (rules, error) {
	out := make(rules, 0, len(entries))
	seen := map[string]bool{}
	for _, e := range entries {
		name, perm, ok := strings.Cut(e, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("entry %q: want name=PERM", e)
		}
		p, err := ParsePerm(perm)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", e, err)
		}
		if group {
			name = groupName(name)
		}
		r := rule{name: name, perm: p}
		if n, ok := strings.CutSuffix(name, "*"); ok {
			r.name, r.prefix = n, true
		}
		if seen[e] {
			continue
		}
		seen[e] = true
		out = append(out, r)
	}
	// Exact names first, then longer prefixes before shorter: the first
	// match is the most specific.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].prefix != out[j].prefix {
			return !out[i].prefix
		}
		return len(out[i].name) > len(out[j].name)
	})
	return out, nil
}

// lookup is the permission of the most specific rule for name; among
// rules equally specific (the same name twice), DENY wins.
func (rs rules) lookup(name string) (Perm, bool) {
	for i, r := range rs {
		if (r.prefix && strings.HasPrefix(name, r.name)) || (!r.prefix && r.name == name) {
			p := r.perm
			for _, o := range rs[i+1:] {
				if o.prefix == r.prefix && o.name == r.name && o.perm&Deny != 0 {
					p = Deny
				}
			}
			return p, true
		}
	}
	return 0, false
}

// Perm is u's permission on the resource: its most specific rule, else
// its default for the kind.
func (u *User) Perm(kind Kind, name string) Perm {
	if kind == Group {
		if p, ok := u.groups.lookup(groupName(name)); ok {
			return p
		}
		return u.defaultGroup
	}
	if p, ok := u.topics.lookup(name); ok {
		return p
	}
	return u.defaultTopic
}

// Lookup returns the user of accessKey.
func (t *Table) Lookup(accessKey string) (*User, bool) {
	u, ok := t.users[accessKey]
	return u, ok
}

// Len is the number of users.
func (t *Table) Len() int { return len(t.users) }
