package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/client"
)

func newACLCmd(a *app) *cobra.Command {
	return groupCmd("acl", "Write a first ACL file; list, add, change and remove users on every daemon",
		`  bolide acl init --file data/config/plain_acl.yml --access-key admin-key --secret-key "$ADMIN_SECRET"
  BOLIDE_ACCESS_KEY=admin-key BOLIDE_SECRET_KEY=... bolide acl user list
  bolide acl user put billing-app --secret-key "$APP_SECRET" --topic-perm 'orders=PUB|SUB' --group-perm billing=SUB`,
		newACLInitCmd(a),
		groupCmd("user", "List, put and delete the users of every broker and NameServer",
			"  bolide acl user list\n  bolide acl user put app-key --secret-key app-secret --default-topic-perm PUB\n  bolide acl user delete app-key",
			newACLUserListCmd(a),
			newACLUserPutCmd(a),
			newACLUserDeleteCmd(a),
		),
	)
}

func newACLInitCmd(a *app) *cobra.Command {
	var file, ak, sk string
	c := &cobra.Command{
		Use:   "init",
		Short: "Write a new ACL file holding one admin user (refuses to overwrite a file)",
		Long: `Write a new ACL file (RocketMQ's plain_acl.yml format, mode 0600) holding one admin user,
to start daemons with --acl --acl-file FILE. It talks to no daemon, and refuses to
overwrite an existing file. Here --access-key and --secret-key are the new admin's keys
(at least 6 characters each; use a long random secret). Then manage users with
'bolide acl user' as that admin.`,
		Example: `  bolide acl init --file data/config/plain_acl.yml --access-key admin-key --secret-key "$(openssl rand -hex 16)"`,
		Args:    exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error {
			if file == "" || ak == "" || sk == "" {
				return usageErrorf("acl init needs --file, --access-key and --secret-key")
			}
			f := &auth.File{Accounts: []auth.Account{{AccessKey: ak, SecretKey: sk, Admin: true}}}
			if _, err := f.Compile(); err != nil {
				return usageErrorf("%v", err)
			}
			// Claim the name first: an existing file is never replaced.
			claim, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("%s already exists: acl init never overwrites a file (manage its users with 'bolide acl user', or remove it first)", file)
			}
			if err != nil {
				return err
			}
			_ = claim.Close()
			if err := auth.WriteFile(file, f); err != nil {
				_ = os.Remove(file)
				return err
			}
			if a.json() {
				return a.emit(map[string]any{"file": file, "accessKey": ak, "admin": true})
			}
			fmt.Fprintf(a.stdout, "wrote %s with admin user %s: start the daemons with --acl --acl-file %s\n", file, ak, file)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&file, "file", "", "the ACL file to write (must not exist)")
	f.StringVar(&ak, "access-key", "", "the admin user's access key")
	f.StringVar(&sk, "secret-key", "", "the admin user's secret key")
	return c
}

// aclUserJSON is one user of one daemon in acl user list.
type aclUserJSON struct {
	Daemon             string   `json:"daemon"`
	Kind               string   `json:"kind"`
	Addr               string   `json:"addr"`
	ACL                bool     `json:"acl"`
	File               string   `json:"file"`
	AccessKey          string   `json:"accessKey"`
	Admin              bool     `json:"admin"`
	DefaultTopicPerm   string   `json:"defaultTopicPerm"`
	DefaultGroupPerm   string   `json:"defaultGroupPerm"`
	TopicPerms         []string `json:"topicPerms"`
	GroupPerms         []string `json:"groupPerms"`
	WhiteRemoteAddress string   `json:"whiteRemoteAddress"`
}

func newACLUserListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the users of every broker and NameServer (never their secrets)",
		Long: `List the users of every daemon of the cluster — the NameServers of --namesrv, then every
registered broker, masters and slaves — one row per daemon and user. Each daemon has its
own ACL file: the rows show where they differ. A daemon that does not answer is reported
on stderr and makes the command fail after the others are listed. Needs an admin user
(--access-key/--secret-key) when ACL is on, a loopback address when it is off.`,
		Example: "  bolide acl user list\n  bolide acl user list -o json | jq -r .accessKey | sort -u",
		Args:    exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error {
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			daemons, err := adm.AclDaemons(ctx)
			if err != nil {
				return err
			}
			t := newTable("DAEMON", "ADDRESS", "ACL", "ACCESS KEY", "ADMIN", "DEFAULT TOPIC", "DEFAULT GROUP", "TOPIC PERMS", "GROUP PERMS", "WHITELIST")
			var failed []string
			var firstErr error
			lists := make([]*client.AclUsers, len(daemons))
			errs := make([]error, len(daemons))
			for i, d := range daemons {
				lists[i], errs[i] = adm.ListAclUsers(ctx, d.Addr)
				if err := errs[i]; err != nil {
					failed = append(failed, daemonLabel(d))
					firstErr = cmp.Or(firstErr, err)
				}
			}
			if len(failed) == len(daemons) {
				return firstErr // the same refusal everywhere, most likely: one line
			}
			for i, d := range daemons {
				us := lists[i]
				if us == nil {
					continue
				}
				for _, u := range us.Users {
					j := aclUserJSON{Daemon: d.Name, Kind: d.Kind, Addr: d.Addr, ACL: us.Enabled, File: us.File,
						AccessKey: u.AccessKey, Admin: u.Admin, DefaultTopicPerm: u.DefaultTopicPerm, DefaultGroupPerm: u.DefaultGroupPerm,
						TopicPerms: nonNil(u.TopicPerms), GroupPerms: nonNil(u.GroupPerms), WhiteRemoteAddress: u.WhiteRemoteAddress}
					if a.json() {
						if err := a.emit(j); err != nil {
							return err
						}
						continue
					}
					t.row(d.Kind+" "+d.Name, d.Addr, onOff(us.Enabled), u.AccessKey, u.Admin, defaultPerm(u, u.DefaultTopicPerm),
						defaultPerm(u, u.DefaultGroupPerm), joinOrDash(u.TopicPerms, ","), joinOrDash(u.GroupPerms, ","), orDash(u.WhiteRemoteAddress))
				}
			}
			if !a.json() {
				if err := t.write(a.stdout); err != nil {
					return err
				}
			}
			if len(failed) > 0 {
				for i, d := range daemons {
					if errs[i] != nil {
						a.warn("%s: %s", daemonLabel(d), a.describeError(errs[i]))
					}
				}
				return fmt.Errorf("could not list the users of %d of %d daemons: %s", len(failed), len(daemons), strings.Join(failed, ", "))
			}
			return nil
		},
	}
}

func newACLUserPutCmd(a *app) *cobra.Command {
	var u client.AclUser
	c := &cobra.Command{
		Use:   "put ACCESS_KEY",
		Short: "Create a user, or replace it whole, on every broker and NameServer",
		Long: `Create the user ACCESS_KEY on every daemon of the cluster, or replace it whole: its secret
and permissions are exactly the flags given (permissions not given are unset: DENY).
Permissions are DENY, PUB, SUB or PUB|SUB; --topic-perm and --group-perm take NAME=PERM and
may be repeated (a NAME ending in * is a prefix). The daemons write their ACL files; the
change applies at once. A daemon refuses a change that would leave it no admin user.

Here --secret-key is the new user's secret: give yours (an admin's) in the environment,
` + envAccessKey + ` and ` + envSecretKey + `. The command reports each daemon and fails if one did not take
the change.`,
		Example: `  bolide acl user put billing-app --secret-key "$APP_SECRET" --topic-perm 'orders=PUB|SUB' --group-perm billing=SUB
  bolide acl user put ops --secret-key "$OPS_SECRET" --admin --white-remote-address '10.0.0.*'
  # as an admin: export BOLIDE_ACCESS_KEY=admin-key BOLIDE_SECRET_KEY=... first`,
		Args: exactArgs(1, "an ACCESS_KEY"),
		RunE: func(_ *cobra.Command, args []string) error {
			u.AccessKey = args[0]
			if u.SecretKey == "" {
				return usageErrorf("acl user put needs the user's --secret-key (a put replaces the user whole; secrets are never read back)")
			}
			if _, err := (&auth.File{Accounts: []auth.Account{accountOf(u)}}).Compile(); err != nil {
				return usageErrorf("%v", err)
			}
			return a.eachACLDaemon("put", u.AccessKey, func(adm *client.Admin, d client.AclDaemon) error {
				ctx, cancel := a.opCtx()
				defer cancel()
				return adm.PutAclUser(ctx, d.Addr, u)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&u.SecretKey, "secret-key", "", "the user's secret key (required; at least 6 characters)")
	f.BoolVar(&u.Admin, "admin", false, "an admin user: every permission, and administrative requests")
	f.StringVar(&u.DefaultTopicPerm, "default-topic-perm", "", "permission on topics no --topic-perm names (default DENY)")
	f.StringVar(&u.DefaultGroupPerm, "default-group-perm", "", "permission on groups no --group-perm names (default DENY)")
	f.StringArrayVar(&u.TopicPerms, "topic-perm", nil, "TOPIC=PERM, repeated (TOPIC may end in * for a prefix)")
	f.StringArrayVar(&u.GroupPerms, "group-perm", nil, "GROUP=PERM, repeated (GROUP may end in * for a prefix)")
	f.StringVar(&u.WhiteRemoteAddress, "white-remote-address", "", "only from these addresses (1.2.3.4, 10.0.0.*, 10.0.0.1-50, comma lists); narrows, never replaces the signature")
	return c
}

func newACLUserDeleteCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ACCESS_KEY",
		Short: "Delete a user from every broker and NameServer",
		Long: `Delete the user ACCESS_KEY from every daemon of the cluster. A daemon that has no such
user reports it; one refuses to delete its last admin user while ACL is on.`,
		Example: "  bolide acl user delete billing-app",
		Args:    exactArgs(1, "an ACCESS_KEY"),
		RunE: func(_ *cobra.Command, args []string) error {
			return a.eachACLDaemon("delete", args[0], func(adm *client.Admin, d client.AclDaemon) error {
				ctx, cancel := a.opCtx()
				defer cancel()
				return adm.DeleteAclUser(ctx, d.Addr, args[0])
			})
		},
	}
}

// aclResultJSON is one daemon's outcome of acl user put or delete.
type aclResultJSON struct {
	Daemon    string `json:"daemon"`
	Kind      string `json:"kind"`
	Addr      string `json:"addr"`
	AccessKey string `json:"accessKey"`
	Action    string `json:"action"`
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
}

// eachACLDaemon applies one change to every daemon and reports each; it
// fails when one did not take it.
func (a *app) eachACLDaemon(action, accessKey string, change func(*client.Admin, client.AclDaemon) error) error {
	adm, err := a.adminClient()
	if err != nil {
		return err
	}
	ctx, cancel := a.opCtx()
	daemons, err := adm.AclDaemons(ctx)
	cancel()
	if err != nil {
		return err
	}
	t := newTable("DAEMON", "ADDRESS", "USER", "RESULT")
	var failed []string
	var firstErr error
	results := make([]aclResultJSON, len(daemons))
	for i, d := range daemons {
		results[i] = aclResultJSON{Daemon: d.Name, Kind: d.Kind, Addr: d.Addr, AccessKey: accessKey, Action: action, OK: true}
		if err := change(adm, d); err != nil {
			results[i].OK, results[i].Error = false, strings.TrimPrefix(a.describeError(err), d.Addr+": ")
			failed = append(failed, daemonLabel(d))
			firstErr = cmp.Or(firstErr, err)
		}
	}
	if len(failed) == len(daemons) && len(daemons) > 0 {
		// Nothing changed: one line, as every command fails.
		return fmt.Errorf("%s of user %s failed on every daemon: %w", action, accessKey, firstErr)
	}
	for i, d := range daemons {
		r := results[i]
		result := map[string]string{"put": "saved", "delete": "deleted"}[action]
		if !r.OK {
			result = "FAILED: " + r.Error
		}
		if a.json() {
			if err := a.emit(r); err != nil {
				return err
			}
			continue
		}
		t.row(d.Kind+" "+d.Name, d.Addr, accessKey, result)
	}
	if !a.json() {
		if err := t.write(a.stdout); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s of user %s failed on %d of %d daemons: %s", action, accessKey, len(failed), len(daemons), strings.Join(failed, ", "))
	}
	return nil
}

// daemonLabel names a daemon in messages: "nameserver", or "broker
// broker-a/0" (the address follows in the error).
func daemonLabel(d client.AclDaemon) string {
	if d.Name == d.Addr {
		return d.Kind + " " + d.Addr
	}
	return d.Kind + " " + d.Name
}

func accountOf(u client.AclUser) auth.Account {
	return auth.Account{AccessKey: u.AccessKey, SecretKey: u.SecretKey, Admin: u.Admin, DefaultTopicPerm: u.DefaultTopicPerm,
		DefaultGroupPerm: u.DefaultGroupPerm, TopicPerms: u.TopicPerms, GroupPerms: u.GroupPerms, WhiteRemoteAddress: u.WhiteRemoteAddress}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// defaultPerm shows a default permission as what it means: unset is
// DENY, except for an admin, who holds every permission.
func defaultPerm(u client.AclUser, perm string) string {
	switch {
	case perm != "":
		return perm
	case u.Admin:
		return "-"
	}
	return "DENY"
}
