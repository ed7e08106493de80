package client

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// aclEnv is a cluster whose broker runs with ACL on (the NameServer with
// it off), and an admin client with the admin user's keys. Users:
// admin-key (admin); app-key may publish to and subscribe acl-orders and
// subscribe as app-group, nothing else.
type aclEnv struct {
	*env
	c *cluster.Cluster
}

func startACLEnv(t *testing.T) *aclEnv {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: "admin-key", SecretKey: "admin-secret", Admin: true},
		{AccessKey: "app-key", SecretKey: "app-secret", TopicPerms: []string{"acl-orders=PUB|SUB"}, GroupPerms: []string{"app-group=SUB"}},
	}}); err != nil {
		t.Fatal(err)
	}
	c := cluster.Start(t, cluster.Options{Broker: func(o *broker.Options) {
		o.Auth = auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}
		o.Credentials = auth.Credentials{AccessKey: "admin-key", SecretKey: "admin-secret"}
	}})
	t.Cleanup(c.Stop)
	e := &env{t: t, c: c, ns: c.NameServerAddrs()}
	a, err := NewAdmin(e.shared(), WithCredentials("admin-key", "admin-secret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	e.admin = a
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, topic := range []string{"acl-orders", "acl-other"} {
		if err := a.CreateTopic(ctx, TopicSpec{Name: topic, Queues: 2}); err != nil {
			t.Fatalf("the admin creates %s: %v", topic, err)
		}
	}
	return &aclEnv{env: e, c: c}
}

func (e *aclEnv) guard() *auth.Guard { return e.c.Broker(0).Guard() }

// The SDK against a broker with ACL on, over both transports: the right
// keys send and consume; a wrong secret, no keys, or a topic the user may
// not publish to fail at once with the coded error, named in its text, and
// are not retried (the broker's guard counts exactly one refusal per send,
// with two retries allowed).
func TestACLSendAndConsume(t *testing.T) {
	e := startACLEnv(t)
	ctx := context.Background()
	for _, tr := range []Transport{TransportFrame, TransportGRPC} {
		t.Run(tr.String(), func(t *testing.T) {
			app := e.producer(WithTransport(tr), WithCredentials("app-key", "app-secret"), WithSendRetries(2))
			body := "to acl-orders over " + tr.String()
			if _, err := app.Send(ctx, &Message{Topic: "acl-orders", Body: []byte(body)}); err != nil {
				t.Fatalf("the right keys: %v", err)
			}

			failures, denials := e.guard().Failures(), e.guard().Denials()
			_, err := app.Send(ctx, &Message{Topic: "acl-other", Body: []byte("x")})
			if !errors.Is(err, ErrNoPermission) || !strings.Contains(err.Error(), "NO_PERMISSION: access key app-key may not") {
				t.Fatalf("a topic the user may not publish to: %v, want NO_PERMISSION", err)
			}
			if d := e.guard().Denials() - denials; d != 1 {
				t.Errorf("the broker refused %d sends, want 1: a refusal is not retried", d)
			}

			for _, c := range []struct {
				name string
				opts []ProducerOption
				want string
			}{
				{"wrong secret", []ProducerOption{WithCredentials("app-key", "not-the-secret")}, "UNAUTHENTICATED: signature check failed for access key app-key"},
				{"no keys", nil, "UNAUTHENTICATED: no credentials"},
			} {
				p := e.producer(append(c.opts, WithTransport(tr), WithSendRetries(2))...)
				before := e.guard().Failures()
				start := time.Now()
				_, err := p.Send(ctx, &Message{Topic: "acl-orders", Body: []byte("refused")})
				if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: %v; want ErrUnauthenticated with %q", c.name, err, c.want)
				}
				if errors.Is(err, ErrBrokerUnreachable) {
					t.Errorf("%s: %v reads as an unreachable broker", c.name, err)
				}
				if n := e.guard().Failures() - before; n != 1 {
					t.Errorf("%s: the broker refused %d times, want 1: a refusal is not retried", c.name, n)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("%s: took %v", c.name, d)
				}
			}
			if e.guard().Failures() < failures {
				t.Fatal("the failure counter went back")
			}

			// A pull consumer of app-group gets what the app sent.
			pc, err := NewPullConsumer("app-group", e.copts(WithTransport(tr), WithCredentials("app-key", "app-secret"),
				WithConsumeFrom(ConsumeFromFirst))...)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			if err := pc.Subscribe("acl-orders", "*"); err != nil {
				t.Fatal(err)
			}
			if err := pc.Start(ctx); err != nil {
				t.Fatal(err)
			}
			e.waitFor(15*time.Second, "the app's message", func() error {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				msgs, err := pc.Poll(pctx)
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					return err
				}
				for _, m := range msgs {
					if string(m.Body) == body {
						return nil
					}
				}
				return errors.New("not yet")
			})
		})
	}
}

// Administrative calls need an admin user: the app's keys are refused
// with NO_PERMISSION, the admin's accepted; the Acl service manages the
// broker's users and a new user can send at once.
func TestACLAdmin(t *testing.T) {
	e := startACLEnv(t)
	ctx := context.Background()
	app, err := NewAdmin(e.shared(), WithCredentials("app-key", "app-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	err = app.CreateTopic(ctx, TopicSpec{Name: "acl-new", Queues: 1})
	if !errors.Is(err, ErrNoPermission) || !strings.Contains(err.Error(), "NO_PERMISSION: ") {
		t.Fatalf("create topic as a user: %v, want NO_PERMISSION", err)
	}
	brokerAddr := e.c.Broker(0).Addr()
	if _, err := app.ListAclUsers(ctx, brokerAddr); !errors.Is(err, ErrNoPermission) {
		t.Fatalf("list users as a user: %v, want NO_PERMISSION", err)
	}

	daemons, err := e.admin.AclDaemons(ctx)
	if err != nil || len(daemons) != 2 || daemons[0].Kind != "nameserver" || daemons[1].Kind != "broker" || daemons[1].Addr != brokerAddr {
		t.Fatalf("daemons %+v, %v", daemons, err)
	}
	users, err := e.admin.ListAclUsers(ctx, brokerAddr)
	if err != nil || !users.Enabled || len(users.Users) != 2 {
		t.Fatalf("the broker's users: %+v, %v", users, err)
	}
	for _, u := range users.Users {
		if u.SecretKey != "" {
			t.Fatalf("ListAclUsers returned the secret of %s", u.AccessKey)
		}
	}

	newcomer := AclUser{AccessKey: "new-user", SecretKey: "new-secret", DefaultTopicPerm: "PUB"}
	if err := e.admin.PutAclUser(ctx, brokerAddr, newcomer); err != nil {
		t.Fatal(err)
	}
	p := e.producer(WithCredentials("new-user", "new-secret"))
	if _, err := p.Send(ctx, &Message{Topic: "acl-other", Body: []byte("from the new user")}); err != nil {
		t.Fatalf("a user put a moment ago sends: %v", err)
	}
	if err := e.admin.DeleteAclUser(ctx, brokerAddr, "new-user"); err != nil {
		t.Fatal(err)
	}
	gone := e.producer(WithCredentials("new-user", "new-secret"))
	if _, err := gone.Send(ctx, &Message{Topic: "acl-other", Body: []byte("x")}); !errors.Is(err, ErrUnauthenticated) ||
		!strings.Contains(err.Error(), "unknown access key new-user") {
		t.Fatalf("a deleted user sends: %v, want UNAUTHENTICATED", err)
	}
}

// A push consumer of a group its user may not subscribe as reports the
// refusal to WithRefusalHandler (and consumes nothing); a pull consumer
// returns it from Poll.
func TestACLConsumerRefusalReported(t *testing.T) {
	e := startACLEnv(t)
	ctx := context.Background()
	refusals := make(chan error, 16)
	push, err := NewPushConsumer("not-app-group", e.copts(WithCredentials("app-key", "app-secret"),
		WithRefusalHandler(func(err error) {
			select {
			case refusals <- err:
			default:
			}
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer push.Close()
	if err := push.Subscribe("acl-orders", "*", ConcurrentListener(func(context.Context, []*MessageExt) ConsumeResult {
		t.Error("a refused consumer got messages")
		return ConsumeSuccess
	})); err != nil {
		t.Fatal(err)
	}
	if err := push.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-refusals:
		if !errors.Is(err, ErrNoPermission) || !strings.Contains(err.Error(), "NO_PERMISSION: access key app-key may not") {
			t.Fatalf("refusal %v, want NO_PERMISSION", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no refusal reported")
	}

	pull, err := NewPullConsumer("not-app-group", e.copts(WithCredentials("app-key", "app-secret"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Close()
	if err := pull.Subscribe("acl-orders", "*"); err != nil {
		t.Fatal(err)
	}
	if err := pull.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := pull.Poll(pctx); !errors.Is(err, ErrNoPermission) {
		t.Fatalf("Poll: %v, want NO_PERMISSION", err)
	}
}
