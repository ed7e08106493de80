package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// cli runs a command and returns its stdout, stderr and exit code.
func cliRun(ns string, args ...string) (string, string, int) {
	var out, errb strings.Builder
	code := run(append([]string{"--namesrv", ns}, args...), strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// TestBrokerRuntimeConfigAndWritePerm drives broker runtime, broker config
// get and set, and broker write-perm against two in-process broker groups.
func TestBrokerRuntimeConfigAndWritePerm(t *testing.T) {
	c := cluster.Start(t, cluster.Options{BrokerGroups: 2})
	c.CreateTopic("ops", 2)
	ns := strings.Join(c.NameServerAddrs(), ",")
	addrA := c.Broker(0).Addr()

	if out, errs, code := cliRun(ns, "send", "--topic", "ops", "--count", "6", "hello"); code != 0 {
		t.Fatalf("send: %d %s %s", code, out, errs)
	}

	// broker runtime: a table per broker, and one JSON object per broker.
	out, errs, code := cliRun(ns, "broker", "runtime")
	if code != 0 || strings.Count(out, "Broker:") != 2 || !strings.Contains(out, "Permission:") ||
		!strings.Contains(out, "6, read and write") || !strings.Contains(out, "msg/s") {
		t.Fatalf("broker runtime: %d\n%s\n%s", code, out, errs)
	}
	t.Logf("$ bolide broker runtime\n%s", out)
	var put int64
	n := 0
	if err := cliJSON(ns, []string{"broker", "runtime"}, func(l []byte) error {
		var j runtimeJSON
		if err := json.Unmarshal(l, &j); err != nil {
			return err
		}
		if j.Addr == "" || j.Broker == "" || j.BrokerPermission != 6 || !j.Writable || j.DiskTotalBytes <= 0 || j.StartTime == "" {
			return fmt.Errorf("runtime %+v", j)
		}
		put += j.PutMessagesTotal
		n++
		return nil
	}); err != nil || n != 2 || put != 6 {
		t.Fatalf("broker runtime -o json: %v, %d objects, put %d (want 2 and 6)", err, n, put)
	}
	out, _, _ = cliRun(ns, "broker", "runtime", "--broker", "broker-a", "-o", "json")
	t.Logf("$ bolide broker runtime --broker broker-a -o json\n%s", out)
	if _, errs, code := cliRun(ns, "broker", "runtime", "--broker", "nosuch"); code != 1 || !strings.Contains(errs, `broker "nosuch" is not registered`) {
		t.Fatalf("unknown broker: %d %s", code, errs)
	}

	// broker config get.
	out, errs, code = cliRun(ns, "broker", "config", "get", "--broker", "broker-a")
	if code != 0 || !strings.Contains(out, "brokerPermission") || !strings.Contains(out, "storePathRootDir") {
		t.Fatalf("config get: %d\n%s\n%s", code, out, errs)
	}
	t.Logf("$ bolide broker config get --broker broker-a\n%s", out)
	keys := map[string]configEntryJSON{}
	if err := cliJSON(ns, []string{"broker", "config", "get", "--broker", "broker-a"}, func(l []byte) error {
		var j configEntryJSON
		if err := json.Unmarshal(l, &j); err != nil {
			return err
		}
		keys[j.Key] = j
		return nil
	}); err != nil || keys["fileReservedTime"].Value != "72" || !keys["fileReservedTime"].Runtime || keys["brokerName"].Runtime || keys["brokerName"].Addr != addrA {
		t.Fatalf("config get -o json: %v %+v", err, keys)
	}

	// broker config set: refused as a whole, then applied to the group.
	if _, errs, code := cliRun(ns, "broker", "config", "set", "--broker", "broker-a", "storePathRootDir=/tmp", "fileReservedTime=48"); code != 1 ||
		!strings.Contains(errs, "storePathRootDir may not be changed at runtime") || !strings.Contains(errs, "brokerPermission") {
		t.Fatalf("config set of a path: %d %s", code, errs)
	}
	t.Logf("$ bolide broker config set --broker broker-a storePathRootDir=/tmp fileReservedTime=48\n%s", errs)
	if _, errs, code := cliRun(ns, "broker", "config", "set", "--broker", "broker-a", "fileReservedTime"); code != 2 || !strings.Contains(errs, "is not KEY=VALUE") {
		t.Fatalf("config set without a value: %d %s", code, errs)
	}
	out, errs, code = cliRun(ns, "broker", "config", "set", "--broker", "broker-a", "fileReservedTime=48", "deleteWhen=03")
	if code != 0 || !strings.Contains(out, "fileReservedTime") || !strings.Contains(out, "48") || !strings.Contains(out, addrA) {
		t.Fatalf("config set: %d\n%s\n%s", code, out, errs)
	}
	t.Logf("$ bolide broker config set --broker broker-a fileReservedTime=48 deleteWhen=03\n%s", out)
	out, _, _ = cliRun(ns, "broker", "config", "set", "--broker", "broker-a", "maxReconsumeTimes=8", "-o", "json")
	t.Logf("$ bolide broker config set --broker broker-a maxReconsumeTimes=8 -o json\n%s", out)
	if err := cliJSON(ns, []string{"broker", "config", "get", "--broker", "broker-a"}, func(l []byte) error {
		var j configEntryJSON
		if err := json.Unmarshal(l, &j); err != nil {
			return err
		}
		if j.Key == "fileReservedTime" && j.Value != "48" || j.Key == "deleteWhen" && j.Value != "03" || j.Key == "maxReconsumeTimes" && j.Value != "8" {
			return fmt.Errorf("%s = %s", j.Key, j.Value)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// broker write-perm off, then on.
	out, errs, code = cliRun(ns, "broker", "write-perm", "broker-a", "off")
	if code != 0 || out != "broker-a: write permission taken away on "+addrA+"\n" {
		t.Fatalf("write-perm off: %d %q %s", code, out, errs)
	}
	t.Logf("$ bolide broker write-perm broker-a off\n%s", out)
	c.WaitFor(10*time.Second, func() error {
		out, errs, code := cliRun(ns, "send", "--topic", "ops", "--count", "4", "drained")
		if code != 0 {
			return fmt.Errorf("send: %s", errs)
		}
		if strings.Contains(out, "broker-a") {
			return fmt.Errorf("a send went to broker-a:\n%s", out)
		}
		return nil
	})
	out, _, _ = cliRun(ns, "broker", "write-perm", "broker-a", "off")
	if out != "broker-a: nothing to change, the write permission was already taken away\n" {
		t.Fatalf("second off: %q", out)
	}
	out, _, _ = cliRun(ns, "broker", "runtime", "--broker", "broker-a")
	if !strings.Contains(out, "4, read only (write permission taken away)") {
		t.Fatalf("runtime of a drained broker:\n%s", out)
	}
	var wp writePermJSON
	if err := cliJSON(ns, []string{"broker", "write-perm", "broker-a", "on"}, func(l []byte) error { return json.Unmarshal(l, &wp) }); err != nil ||
		!wp.Writable || len(wp.Changed) != 1 || wp.Changed[0] != addrA {
		t.Fatalf("write-perm on -o json: %v %+v", err, wp)
	}
	if _, errs, code := cliRun(ns, "broker", "write-perm", "broker-a", "maybe"); code != 2 || !strings.Contains(errs, "off or on") {
		t.Fatalf("write-perm maybe: %d %s", code, errs)
	}
}
