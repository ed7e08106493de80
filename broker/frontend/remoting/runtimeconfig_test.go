package remoting_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// remoteConfig reads GET_BROKER_CONFIG as mqadmin getBrokerConfig does.
func remoteConfig(t *testing.T, c *rmq.Conn) map[string]string {
	t.Helper()
	resp := wantOK(t, invoke(t, c, rmq.GetBrokerConfig, nil, nil))
	props, err := rmq.ParseProperties(resp.Body)
	if err != nil {
		t.Fatalf("GET_BROKER_CONFIG body: %v\n%s", err, resp.Body)
	}
	return props
}

// coreValue is a key's value in the core's configuration.
func coreValue(b *server.Server, key string) string {
	for _, e := range b.Config() {
		if e.Key == key {
			return e.Value
		}
	}
	return ""
}

// TestBrokerConfigOverRemoting: GET_BROKER_CONFIG lists the core's
// settings; UPDATE_BROKER_CONFIG changes the core's runtime keys only,
// all or nothing, persisted as bolide.v1 UpdateBrokerConfig persists them.
func TestBrokerConfigOverRemoting(t *testing.T) {
	b, c := adminBroker(t)
	props := remoteConfig(t, c)
	if len(props) != len(b.Config()) {
		t.Fatalf("GET_BROKER_CONFIG has %d keys, the core %d", len(props), len(b.Config()))
	}
	for key, want := range map[string]string{"brokerName": "broker-a", "maxMessageSize": strconv.Itoa(1 << 20),
		"storePathRootDir": b.Options().StoreDir, "brokerPermission": "6", "fileReservedTime": "72"} {
		if props[key] != want {
			t.Errorf("GET_BROKER_CONFIG %s=%q, want %q", key, props[key], want)
		}
	}

	// A key that may not change, next to one that may: NO_PERMISSION
	// naming it and the allowed keys; nothing changes.
	resp := invoke(t, c, rmq.UpdateBrokerConfig, nil, []byte("storePathRootDir=/tmp/elsewhere\nmaxMessageSize=4096\n"))
	if resp.Code != rmq.NoPermission || !strings.Contains(resp.Remark, "storePathRootDir may not be changed at runtime") ||
		!strings.Contains(resp.Remark, strings.Join(broker.RuntimeConfigKeys(), ", ")) {
		t.Fatalf("path key: %d %q", resp.Code, resp.Remark)
	}
	// A bad value of an allowed key: INVALID_PARAMETER, nothing changes.
	resp = invoke(t, c, rmq.UpdateBrokerConfig, nil, []byte("fileReservedTime=48\nbrokerPermission=2\n"))
	if resp.Code != rmq.InvalidParameter || !strings.Contains(resp.Remark, "brokerPermission=2") {
		t.Fatalf("bad value: %d %q", resp.Code, resp.Remark)
	}
	if coreValue(b, "maxMessageSize") != strconv.Itoa(1<<20) || coreValue(b, "fileReservedTime") != "72" || b.Permission() != 6 {
		t.Fatal("a refused update changed the configuration")
	}
	if _, err := os.Stat(filepath.Join(b.Options().StoreDir, broker.RuntimeConfigFile)); !os.IsNotExist(err) {
		t.Fatalf("a refused update wrote %s: %v", broker.RuntimeConfigFile, err)
	}

	// Allowed keys: applied together, read back over both paths, persisted.
	wantOK(t, invoke(t, c, rmq.UpdateBrokerConfig, nil, []byte("fileReservedTime=48\nmaxMessageSize=2048\n")))
	props = remoteConfig(t, c)
	if props["fileReservedTime"] != "48" || props["maxMessageSize"] != "2048" || coreValue(b, "maxMessageSize") != "2048" {
		t.Fatalf("after the update: remoting %s/%s, core %s", props["fileReservedTime"], props["maxMessageSize"], coreValue(b, "maxMessageSize"))
	}
	data, err := os.ReadFile(filepath.Join(b.Options().StoreDir, broker.RuntimeConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var saved map[string]string
	if err := json.Unmarshal(data, &saved); err != nil || saved["fileReservedTime"] != "48" || saved["maxMessageSize"] != "2048" {
		t.Fatalf("%s: %v %s", broker.RuntimeConfigFile, err, data)
	}
}

// TestRemotingLiveMaxMessageSize: the body limit of a remoting send is
// the broker's limit at the time of the send. A zlib body that inflates
// past the start value is refused, then accepted once maxMessageSize is
// raised over the wire — and refused again when it is lowered.
func TestRemotingLiveMaxMessageSize(t *testing.T) {
	b := startBroker(t, func(o *broker.Options) { o.MaxMessageSize = 4096 })
	newTopic(t, b, "big", 1)
	c := dialBroker(t, b.Addr(), nil)
	body := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB, inflated
	send := func() *rmq.Command {
		return invoke(t, c, rmq.SendMessage, sendExt("PG", "big", 0, 1, props("TAGS", "Z")), zlibBytes(t, body))
	}
	if resp := send(); resp.Code != rmq.MessageIllegal || !strings.Contains(resp.Remark, "4096") {
		t.Fatalf("16 KiB body under a 4096-byte limit: %d %q", resp.Code, resp.Remark)
	}
	wantOK(t, invoke(t, c, rmq.UpdateBrokerConfig, nil, []byte("maxMessageSize=65536")))
	wantOK(t, send())
	if got := waitMessages(t, b, "big", 0, 1); !bytes.Equal(got[0].Body, body) {
		t.Fatalf("stored body of %d bytes, want %d", len(got[0].Body), len(body))
	}
	wantOK(t, invoke(t, c, rmq.UpdateBrokerConfig, nil, []byte("maxMessageSize=8192")))
	if resp := send(); resp.Code != rmq.MessageIllegal || !strings.Contains(resp.Remark, "8192") {
		t.Fatalf("16 KiB body under an 8192-byte limit: %d %q", resp.Code, resp.Remark)
	}
}

// TestRuntimeInfoFromCore: GET_BROKER_RUNTIME_INFO gives the core's
// counters and rates under RocketMQ's key names.
func TestRuntimeInfoFromCore(t *testing.T) {
	b, c := adminBroker(t)
	newTopic(t, b, "rt", 2)
	sendN(t, b, "rt", 7, func(int) string { return "k" })
	waitMessages(t, b, "rt", 0, 4)
	resp := wantOK(t, invoke(t, c, rmq.GetBrokerRuntimeInfo, nil, nil))
	var kv struct{ Table map[string]string }
	if err := json.Unmarshal(resp.Body, &kv); err != nil {
		t.Fatal(err)
	}
	rt := b.Runtime()
	tb := kv.Table
	if tb["msgPutTotalTodayNow"] != "7" || tb["putMessageTimesTotal"] != "7" || tb["putMessageSizeTotal"] != strconv.FormatInt(rt.PutBytes, 10) {
		t.Errorf("put totals: %s %s %s, core %d bytes", tb["msgPutTotalTodayNow"], tb["putMessageTimesTotal"], tb["putMessageSizeTotal"], rt.PutBytes)
	}
	if tb["msgGetTotalTodayNow"] != strconv.FormatInt(rt.GetMessages, 10) {
		t.Errorf("msgGetTotalTodayNow %s, core %d", tb["msgGetTotalTodayNow"], rt.GetMessages)
	}
	// Seven messages in a broker younger than a minute: a rate above 0.
	if tps, err := strconv.ParseFloat(tb["putTps"], 64); err != nil || tps <= 0 {
		t.Errorf("putTps %q", tb["putTps"])
	}
	if tb["getTransferredTps"] == "" || tb["getTransferredTps"] != tb["getTransferedTps"] {
		t.Errorf("get rates %q %q", tb["getTransferredTps"], tb["getTransferedTps"])
	}
	if !strings.HasPrefix(tb["commitLogDirCapacity"], "Total : ") || tb["brokerPermission"] != "6" ||
		tb["flushMode"] == "" || tb["topicCount"] != strconv.Itoa(rt.Topics) {
		t.Errorf("runtime info: %v", tb)
	}
	for _, invented := range []string{"getFoundTps", "getMissTps", "getTotalTps"} {
		if _, ok := tb[invented]; ok {
			t.Errorf("runtime info has %s, which Bolide does not measure", invented)
		}
	}
}
