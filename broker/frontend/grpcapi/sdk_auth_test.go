package grpcapi_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/nameserver"
)

// aclCluster starts a NameServer and a broker, both with ACL on and the
// users of aclFile; the broker registers with the admin key. It returns
// the NameServer's address.
func aclCluster(t *testing.T) string {
	t.Helper()
	nsFile := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(nsFile, aclFile()); err != nil {
		t.Fatal(err)
	}
	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = nameserver.GossipOff
	no.Auth = auth.Config{Enabled: true, File: nsFile, MaxSkew: auth.DefaultMaxSkew}
	ns, err := nameserver.New(no, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Error(err)
		}
	})
	aclBrokerWith(t, "127.0.0.1:0", true, func(o *broker.Options) {
		o.NameServers = []string{ns.Addr()}
		o.Credentials = admin
	})
	return ns.Addr()
}

// TestSDKWithCredentials: the SDK with client.WithCredentials against a
// NameServer and a broker with ACL on, over frames and over gRPC: an
// admin creates the topic, a user with PUB|SUB sends and consumes; a user
// without PUB is refused (ErrNoPermission), a wrong secret too
// (ErrUnauthenticated), and neither stores anything.
func TestSDKWithCredentials(t *testing.T) {
	nsAddr := aclCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	adm, err := client.NewAdmin(client.WithNameServers(nsAddr), client.WithCredentials(admin.AccessKey, admin.SecretKey))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err = adm.CreateTopic(ctx, client.TopicSpec{Name: "t1", Queues: 1})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin creates t1 (the broker registered with its admin key?): %v", err)
		}
	}
	userAdm, err := client.NewAdmin(client.WithNameServers(nsAddr), client.WithCredentials(pubSub.AccessKey, pubSub.SecretKey))
	if err != nil {
		t.Fatal(err)
	}
	defer userAdm.Close()
	if err := userAdm.CreateTopic(ctx, client.TopicSpec{Name: "t2", Queues: 1}); !errors.Is(err, client.ErrNoPermission) {
		t.Fatalf("a plain user creates a topic: %v, want ErrNoPermission", err)
	}

	for _, tr := range []struct {
		name string
		t    client.Transport
	}{{"frame", client.TransportFrame}, {"grpc", client.TransportGRPC}} {
		t.Run(tr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			producer := func(c auth.Credentials) *client.Producer {
				p, err := client.NewProducer("p1", client.WithNameServers(nsAddr), client.WithTransport(tr.t),
					client.WithCredentials(c.AccessKey, c.SecretKey))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close() })
				return p
			}
			body := "hello over " + tr.name
			good := producer(pubSub)
			if err := good.Start(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := good.Send(ctx, &client.Message{Topic: "t1", Body: []byte(body)})
			if err != nil {
				t.Fatalf("send with PUB|SUB: %v", err)
			}

			noPub := producer(subOnly)
			if err := noPub.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := noPub.Send(ctx, &client.Message{Topic: "t1", Body: []byte("refused")}); !errors.Is(err, client.ErrNoPermission) ||
				!strings.Contains(err.Error(), "NO_PERMISSION") {
				t.Fatalf("send without PUB: %v, want ErrNoPermission", err)
			}
			wrong := producer(auth.Credentials{AccessKey: pubSub.AccessKey, SecretKey: "not-the-secret"})
			err = wrong.Start(ctx)
			if err == nil {
				_, err = wrong.Send(ctx, &client.Message{Topic: "t1", Body: []byte("refused")})
			}
			if !errors.Is(err, client.ErrUnauthenticated) {
				t.Fatalf("a wrong secret: %v, want ErrUnauthenticated", err)
			}
			after, err := good.Send(ctx, &client.Message{Topic: "t1", Body: []byte("marker")})
			if err != nil {
				t.Fatal(err)
			}
			if after.QueueOffset != res.QueueOffset+1 {
				t.Fatalf("the next send is at offset %d, want %d: a refused send was stored", after.QueueOffset, res.QueueOffset+1)
			}

			c, err := client.NewPullConsumer("g1", client.WithNameServers(nsAddr), client.WithTransport(tr.t),
				client.WithCredentials(pubSub.AccessKey, pubSub.SecretKey), client.WithConsumeFrom(client.ConsumeFromFirst))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Subscribe("t1", "*"); err != nil {
				t.Fatal(err)
			}
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for {
				msgs, err := c.Poll(ctx)
				if err != nil {
					t.Fatalf("poll: %v", err)
				}
				for _, m := range msgs {
					if string(m.Body) == body {
						return
					}
				}
			}
		})
	}
}
