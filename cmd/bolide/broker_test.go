package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/freeport"
)

// fastReplication shortens the replication timings for in-process tests.
func fastReplication(o *broker.Options) {
	o.Replication.HeartbeatInterval = 100 * time.Millisecond
	o.Replication.Timeout = time.Second
	o.Replication.MetadataSyncInterval = 100 * time.Millisecond
}

// cliJSON runs a command with -o json and decodes each stdout line with
// decode; it fails on a non-zero exit.
func cliJSON(ns string, args []string, decode func(line []byte) error) error {
	var out, errb strings.Builder
	code := run(append(append([]string{"--namesrv", ns}, args...), "-o", "json"), strings.NewReader(""), &out, &errb)
	if code != 0 {
		return fmt.Errorf("%q: exit %d: %s", args, code, errb.String())
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l == "" {
			continue
		}
		if err := decode([]byte(l)); err != nil {
			return fmt.Errorf("%q: %w in %q", args, err, l)
		}
	}
	return nil
}

// TestBrokerStatusClusterListAndPromote: broker status and cluster list
// show a master with its in-sync slave and the slave's lag; once the master
// is gone, broker promote --broker-name makes the slave the master with the
// next epoch.
func TestBrokerStatusClusterListAndPromote(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Broker: fastReplication})
	c.CreateTopic("bp", 2)
	master := c.Broker(0).Addr()
	slave := c.StartSlave(0, 1).Broker().Addr()
	ns := strings.Join(c.NameServerAddrs(), ",")
	p, err := client.NewProducer("bp-pg", client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := p.Send(ctx, &client.Message{Topic: "bp", Body: []byte(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	var ms replicationJSON
	c.WaitFor(30*time.Second, func() error {
		if err := cliJSON(ns, []string{"broker", "status", master}, func(l []byte) error { return json.Unmarshal(l, &ms) }); err != nil {
			return err
		}
		if ms.Role != "MASTER" || ms.InSyncSlaves != 1 || len(ms.Slaves) != 1 || !ms.Slaves[0].InSync || ms.Slaves[0].BrokerID != 1 ||
			ms.Slaves[0].AckOffset != ms.CommitLogMaxOffset {
			return fmt.Errorf("master status %+v", ms)
		}
		return nil
	})
	if ms.Mode != broker.ReplicationAsync || ms.CommitLogMaxOffset == 0 {
		t.Fatalf("master status %+v", ms)
	}
	var ss replicationJSON
	c.WaitFor(30*time.Second, func() error {
		if err := cliJSON(ns, []string{"broker", "status", slave}, func(l []byte) error { return json.Unmarshal(l, &ss) }); err != nil {
			return err
		}
		if ss.Role != "SLAVE" || ss.MasterAddr != master || ss.State != "REPLICATING" || ss.LagBytes != 0 || ss.LastMetadataSync == "" {
			return fmt.Errorf("slave status %+v", ss)
		}
		return nil
	})
	code, out, errb := runCLI(t, "", "--namesrv", ns, "broker", "status", master)
	if code != 0 || !strings.Contains(out, "Role:            MASTER") || !strings.Contains(out, "In-sync slaves:  1 of 1") ||
		!strings.Contains(out, "SLAVE ID") {
		t.Fatalf("broker status (exit %d, stderr %q):\n%s", code, errb, out)
	}
	code, out, _ = runCLI(t, "", "--namesrv", ns, "broker", "status", slave)
	if code != 0 || !strings.Contains(out, "Master:          "+master) || !strings.Contains(out, "Lag:             0 B") {
		t.Fatalf("slave status (exit %d):\n%s", code, out)
	}

	// cluster list: both brokers with their replication columns.
	c.WaitFor(30*time.Second, func() error {
		rows := map[int64]brokerJSON{}
		if err := cliJSON(ns, []string{"cluster", "list"}, func(l []byte) error {
			var r brokerJSON
			err := json.Unmarshal(l, &r)
			rows[r.BrokerID] = r
			return err
		}); err != nil {
			return err
		}
		m, s := rows[0], rows[1]
		if len(rows) != 2 || m.Role != "MASTER" || m.ReplicationMode != "async" || m.Epoch != ms.Epoch || m.InSyncSlaves != 1 || m.Slaves != 1 {
			return fmt.Errorf("master row %+v (%d rows)", m, len(rows))
		}
		if s.Role != "SLAVE" || s.Epoch != ms.Epoch || s.LagBytes != 0 || s.Addr != slave {
			return fmt.Errorf("slave row %+v", s)
		}
		return nil
	})
	code, out, _ = runCLI(t, "", "--namesrv", ns, "cluster", "list")
	if code != 0 || !strings.Contains(out, "REPLICATION") || !strings.Contains(out, "1 of 1 in sync") || !strings.Contains(out, "0 B behind") {
		t.Fatalf("cluster list (exit %d):\n%s", code, out)
	}

	// The master goes away; the slave is promoted by group name.
	c.StopBroker(0)
	var pr promoteJSON
	c.WaitFor(30*time.Second, func() error {
		return cliJSON(ns, []string{"broker", "promote", "--broker-name", "broker-a"}, func(l []byte) error { return json.Unmarshal(l, &pr) })
	})
	if pr.Addr != slave || pr.Broker != "broker-a" || pr.Status != "OK" || pr.Epoch != ss.Epoch+1 || pr.PreviousBrokerID != 1 ||
		!pr.Registered || pr.CommitLogMaxOffset != ss.CommitLogMaxOffset {
		t.Fatalf("promote: %+v (slave before: %+v)", pr, ss)
	}
	if err := cliJSON(ns, []string{"broker", "status", slave}, func(l []byte) error { return json.Unmarshal(l, &ss) }); err != nil {
		t.Fatal(err)
	}
	if ss.Role != "MASTER" || ss.Epoch != pr.Epoch {
		t.Fatalf("status after the promotion: %+v", ss)
	}
	// Promoting a master again fails, and says why.
	for _, args := range [][]string{
		{"broker", "promote", "--broker", slave},
		{"broker", "promote", "--broker", slave, "--broker-name", "broker-a", "--epoch", "1"},
	} {
		code, out, errb := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
		checkOneLineError(t, args, code, out, errb, exitFailed, "already the master")
	}
	args := []string{"broker", "promote", "--broker-name", "broker-a"}
	code, out, errb = runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
	checkOneLineError(t, args, code, out, errb, exitFailed, `broker group "broker-a" has no registered slave`)
	args = []string{"broker", "promote", "--broker", slave, "--broker-name", "broker-z"}
	code, out, errb = runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
	checkOneLineError(t, args, code, out, errb, exitFailed, `belongs to "broker-a", not "broker-z"`)
}

func TestBrokerCommandErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"broker", "promote"}, "--broker ADDR and/or --broker-name NAME"},
		{[]string{"broker", "promote", "--broker", "nohost"}, "--broker"},
		{[]string{"broker", "promote", "--broker-name", "g", "--epoch", "-1"}, "--epoch must not be negative"},
		{[]string{"broker", "promote", "extra"}, "takes no arguments"},
		{[]string{"broker", "status"}, "needs the broker's ADDR"},
		{[]string{"broker", "status", "localhost"}, "ADDR"},
		{[]string{"broker", "nope"}, `unknown command "nope" for "bolide broker"`},
	} {
		for _, extra := range [][]string{nil, {"-o", "json"}} {
			args := append(append([]string{}, c.args...), extra...)
			code, out, errb := runCLI(t, "", args...)
			checkOneLineError(t, args, code, out, errb, exitUsage, c.want)
		}
	}
	closed, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"broker", "status", closed}, {"broker", "promote", "--broker", closed}} {
		code, out, errb := runCLI(t, "", args...)
		checkOneLineError(t, args, code, out, errb, exitFailed, "cannot reach the broker at "+closed+": connection refused")
	}
}

// TestBrokerPromoteForce: a slave that never replicated from its master
// is not promoted (it could drop acknowledged messages) unless --force.
func TestBrokerPromoteForce(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Broker: fastReplication})
	nowhere, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	slave := c.StartSlave(0, 1, func(o *broker.Options) { o.Replication.MasterHAAddr = nowhere }).Broker().Addr()
	ns := strings.Join(c.NameServerAddrs(), ",")
	args := []string{"broker", "promote", "--broker", slave}
	code, out, errb := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
	checkOneLineError(t, args, code, out, errb, exitFailed, "could drop acknowledged messages (force to promote anyway)")
	var pr promoteJSON
	if err := cliJSON(ns, append(args, "--force"), func(l []byte) error { return json.Unmarshal(l, &pr) }); err != nil {
		t.Fatal(err)
	}
	if pr.Addr != slave || pr.Mode != "manual" || !pr.Forced || pr.Status != "OK" || pr.Epoch != 1 {
		t.Fatalf("forced promotion: %+v", pr)
	}
}
