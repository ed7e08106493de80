package remoting_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/message"
)

// adminBroker starts a broker without NameServers, with remoting on its
// port, and a remoting connection to it.
func adminBroker(t *testing.T) (*server.Server, *rmq.Conn) {
	t.Helper()
	b := startBroker(t)
	return b, dialBroker(t, b.Addr(), nil)
}

func wantOK(t *testing.T, resp *rmq.Command) *rmq.Command {
	t.Helper()
	if resp.Code != rmq.Success {
		t.Fatalf("response %d %q, want success", resp.Code, resp.Remark)
	}
	return resp
}

// fastjsonKeys turns fastjson's MessageQueue map keys into strings, so that
// encoding/json reads the body: {"brokerName":"b","queueId":0,"topic":"T"}
// becomes "T/b/0".
func fastjsonKeys(body []byte) []byte {
	re := regexp.MustCompile(`\{"brokerName":"([^"]*)","queueId":(\d+),"topic":"([^"]*)"\}:`)
	return re.ReplaceAll(body, []byte(`"$3/$1/$2":`))
}

// sent numbers the messages sendN sends to each topic of a broker: each gets a unique
// id of its own, UNIQ0, UNIQ1, ... (a repeated id would be answered from the
// broker's deduplication window).
var sent sync.Map // sentKey → *atomic.Int64

type sentKey struct {
	b     *server.Server
	topic string
}

func sendN(t *testing.T, b *server.Server, topic string, n int, key func(i int) string) []int64 {
	t.Helper()
	var offs []int64
	for i := 0; i < n; i++ {
		n, _ := sent.LoadOrStore(sentKey{b, topic}, new(atomic.Int64))
		id := "UNIQ" + strconv.FormatInt(n.(*atomic.Int64).Add(1)-1, 10)
		m := &message.Ext{Message: message.Message{Topic: topic, Body: []byte("body-" + strconv.Itoa(i)),
			Properties: map[string]string{message.PropertyUniqueKey: id, message.PropertyKeys: key(i), message.PropertyTags: "TagA"}},
			QueueID: int32(i % 2)}
		res, err := b.Send(context.Background(), []*message.Ext{m})
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, res[0].PhysicalOffset)
	}
	// Queues and the index are written by dispatch, after the send.
	deadline := time.Now().Add(5 * time.Second)
	for b.Info().DispatchBehindBytes > 0 {
		if time.Now().After(deadline) {
			t.Fatal("dispatch did not catch up")
		}
		time.Sleep(2 * time.Millisecond)
	}
	return offs
}

func TestAdminTopicsAndStats(t *testing.T) {
	b, c := adminBroker(t)
	wantOK(t, invoke(t, c, rmq.UpdateAndCreateTopic, map[string]string{"topic": "AdminT", "defaultTopic": "TBW102",
		"readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
		"order": "false", "attributes": "+message.type=NORMAL"}, nil))
	offs := sendN(t, b, "AdminT", 5, func(i int) string { return "k" + strconv.Itoa(i%2) })

	// All topic configs.
	resp := wantOK(t, invoke(t, c, rmq.GetAllTopicConfig, nil, nil))
	var all struct {
		TopicConfigTable map[string]struct {
			TopicName      string            `json:"topicName"`
			ReadQueueNums  int32             `json:"readQueueNums"`
			WriteQueueNums int32             `json:"writeQueueNums"`
			Perm           int32             `json:"perm"`
			Attributes     map[string]string `json:"attributes"`
		} `json:"topicConfigTable"`
	}
	if err := json.Unmarshal(resp.Body, &all); err != nil {
		t.Fatal(err)
	}
	if tc := all.TopicConfigTable["AdminT"]; tc.ReadQueueNums != 2 || tc.Perm != 6 || tc.Attributes["message.type"] != "NORMAL" {
		t.Fatalf("AdminT in GET_ALL_TOPIC_CONFIG: %+v", tc)
	}
	if resp.String("totalTopicNum") != strconv.Itoa(len(all.TopicConfigTable)) {
		t.Fatalf("totalTopicNum %q for %d topics", resp.String("totalTopicNum"), len(all.TopicConfigTable))
	}
	if r := invoke(t, c, rmq.GetTopicConfig, map[string]string{"topic": "nope", "lo": "true"}, nil); r.Code != rmq.TopicNotExist {
		t.Fatalf("GET_TOPIC_CONFIG of a missing topic: %d", r.Code)
	}

	// Topic stats: 3 messages on queue 0, 2 on queue 1.
	resp = wantOK(t, invoke(t, c, rmq.GetTopicStatsInfo, map[string]string{"topic": "AdminT"}, nil))
	if !strings.Contains(string(resp.Body), `{"brokerName":"broker-a","queueId":0,"topic":"AdminT"}:{"minOffset":0,"maxOffset":3,`) {
		t.Fatalf("topic stats body: %s", resp.Body)
	}
	var stats struct {
		OffsetTable map[string]struct{ MinOffset, MaxOffset, LastUpdateTimestamp int64 } `json:"offsetTable"`
	}
	if err := json.Unmarshal(fastjsonKeys(resp.Body), &stats); err != nil {
		t.Fatalf("%v: %s", err, resp.Body)
	}
	if q1 := stats.OffsetTable["AdminT/broker-a/1"]; q1.MaxOffset != 2 || q1.LastUpdateTimestamp <= 0 {
		t.Fatalf("queue 1 stats: %+v", q1)
	}

	// Runtime info counts the five messages.
	resp = wantOK(t, invoke(t, c, rmq.GetBrokerRuntimeInfo, nil, nil))
	var kv struct{ Table map[string]string }
	if err := json.Unmarshal(resp.Body, &kv); err != nil {
		t.Fatal(err)
	}
	if kv.Table["msgPutTotalTodayNow"] != "5" || kv.Table["brokerActive"] != "true" || kv.Table["earliestMessageTimeStamp"] == "" {
		t.Fatalf("runtime info: %v", kv.Table)
	}

	// View by offset and query by key.
	resp = wantOK(t, invoke(t, c, rmq.ViewMessageByID, map[string]string{"topic": "AdminT", "offset": strconv.FormatInt(offs[3], 10)}, nil))
	m, err := message.Decode(resp.Body)
	if err != nil || string(m.Body) != "body-3" {
		t.Fatalf("view by offset: %v %+v", err, m)
	}
	resp = wantOK(t, invoke(t, c, rmq.QueryMessage, map[string]string{"topic": "AdminT", "key": "k1", "maxNum": "64",
		"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(1<<62, 10), "_UNIQUE_KEY_QUERY": "false"}, nil))
	var bodies []string
	for rest := resp.Body; len(rest) > 0; {
		size := int(binary.BigEndian.Uint32(rest))
		m, err := message.Decode(rest[:size])
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, string(m.Body))
		rest = rest[size:]
	}
	sort.Strings(bodies)
	if strings.Join(bodies, ",") != "body-1,body-3" || resp.String("indexLastUpdatePhyoffset") == "" {
		t.Fatalf("query by key k1: %v, ext %v", bodies, resp.Ext)
	}
	resp = wantOK(t, invoke(t, c, rmq.QueryMessage, map[string]string{"topic": "AdminT", "key": "UNIQ4", "maxNum": "64",
		"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(1<<62, 10), "_UNIQUE_KEY_QUERY": "true"}, nil))
	if m, err := message.Decode(resp.Body); err != nil || string(m.Body) != "body-4" {
		t.Fatalf("query by unique key: %v %+v", err, m)
	}
	if r := invoke(t, c, rmq.QueryMessage, map[string]string{"topic": "AdminT", "key": "none", "maxNum": "64",
		"beginTimestamp": "0", "endTimestamp": "0"}, nil); r.Code != rmq.QueryNotFound {
		t.Fatalf("query of a missing key: %d %q", r.Code, r.Remark)
	}

	// Delete; a second delete is no error.
	wantOK(t, invoke(t, c, rmq.DeleteTopicInBroker, map[string]string{"topic": "AdminT"}, nil))
	wantOK(t, invoke(t, c, rmq.DeleteTopicInBroker, map[string]string{"topic": "AdminT"}, nil))
	if r := invoke(t, c, rmq.GetTopicStatsInfo, map[string]string{"topic": "AdminT"}, nil); r.Code != rmq.TopicNotExist {
		t.Fatalf("stats of a deleted topic: %d", r.Code)
	}
}

func TestAdminGroupsOffsetsAndRefusals(t *testing.T) {
	b, c := adminBroker(t)
	if err := b.CreateTopic(broker.TopicConfig{Name: "GT", ReadQueueNums: 2, WriteQueueNums: 2}, false); err != nil {
		t.Fatal(err)
	}
	sendN(t, b, "GT", 6, func(int) string { return "k" })
	// Store timestamps are in ms: before is in none of the sends' ms.
	time.Sleep(5 * time.Millisecond)
	before := time.Now().UnixMilli()
	time.Sleep(5 * time.Millisecond)
	sendN(t, b, "GT", 2, func(int) string { return "k" }) // offsets 3 on queues 0 and 1
	if err := b.CommitOffsets("CG", []broker.QueueOffset{{Queue: broker.Queue{Topic: "GT", ID: 0}, Offset: 2}}); err != nil {
		t.Fatal(err)
	}

	// Subscription groups.
	wantOK(t, invoke(t, c, rmq.UpdateAndCreateSubscriptionGroup, nil,
		[]byte(`{"groupName":"SG","consumeEnable":true,"retryMaxTimes":3,"groupRetryPolicy":{"type":"CUSTOMIZED"},"attributes":{}}`)))
	resp := wantOK(t, invoke(t, c, rmq.GetAllSubscriptionGroupConfig, nil, nil))
	var groups struct {
		SubscriptionGroupTable map[string]struct {
			GroupName      string `json:"groupName"`
			RetryMaxTimes  int    `json:"retryMaxTimes"`
			RetryQueueNums int    `json:"retryQueueNums"`
		} `json:"subscriptionGroupTable"`
	}
	if err := json.Unmarshal(resp.Body, &groups); err != nil {
		t.Fatal(err)
	}
	if g := groups.SubscriptionGroupTable["SG"]; g.RetryMaxTimes != 3 || g.RetryQueueNums != 1 {
		t.Fatalf("SG: %+v", g)
	}
	if _, ok := groups.SubscriptionGroupTable["CG"]; !ok {
		t.Fatalf("a group with offsets is not listed: %s", resp.Body)
	}
	wantOK(t, invoke(t, c, rmq.DeleteSubscriptionGroup, map[string]string{"groupName": "SG", "cleanOffset": "false"}, nil))
	if r := invoke(t, c, rmq.GetSubscriptionGroupConfig, map[string]string{"group": "SG"}, nil); r.Code != rmq.SubscriptionGroupNotExist {
		t.Fatalf("a deleted group: %d", r.Code)
	}

	// Consume stats and who consumes.
	resp = wantOK(t, invoke(t, c, rmq.GetConsumeStats, map[string]string{"consumerGroup": "CG", "topic": "GT"}, nil))
	var cs struct {
		OffsetTable map[string]struct{ BrokerOffset, ConsumerOffset, PullOffset, LastTimestamp int64 } `json:"offsetTable"`
	}
	if err := json.Unmarshal(fastjsonKeys(resp.Body), &cs); err != nil {
		t.Fatalf("%v: %s", err, resp.Body)
	}
	if q0, q1 := cs.OffsetTable["GT/broker-a/0"], cs.OffsetTable["GT/broker-a/1"]; q0.BrokerOffset != 4 || q0.ConsumerOffset != 2 ||
		q0.LastTimestamp <= 0 || q1.BrokerOffset != 4 || q1.ConsumerOffset != 0 || q1.LastTimestamp != 0 {
		t.Fatalf("consume stats: %+v", cs.OffsetTable)
	}
	resp = wantOK(t, invoke(t, c, rmq.QueryTopicConsumeByWho, map[string]string{"topic": "GT"}, nil))
	if string(resp.Body) != `{"groupList":["CG"]}` {
		t.Fatalf("consumed by: %s", resp.Body)
	}

	// Reset by time: both queues go back to 3, the first message stored
	// after before; without force, only backwards (queue 0 stays at 2; queue
	// 1, never committed, moves).
	resp = wantOK(t, invoke(t, c, rmq.InvokeBrokerToResetOffset, map[string]string{"group": "CG", "topic": "GT",
		"timestamp": strconv.FormatInt(before, 10), "isForce": "false", "offset": "-1"}, nil))
	if want := `{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"GT"}:2,{"brokerName":"broker-a","queueId":1,"topic":"GT"}:3}}`; string(resp.Body) != want {
		t.Fatalf("reset without force: %s", resp.Body)
	}
	resp = wantOK(t, invoke(t, c, rmq.InvokeBrokerToResetOffset, map[string]string{"group": "CG", "topic": "GT",
		"timestamp": strconv.FormatInt(before, 10), "isForce": "true", "offset": "-1"}, nil))
	if want := `{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"GT"}:3,{"brokerName":"broker-a","queueId":1,"topic":"GT"}:3}}`; string(resp.Body) != want {
		t.Fatalf("forced reset: %s", resp.Body)
	}
	if off, _ := b.QueryOffset("CG", "GT", 1); off != 3 {
		t.Fatalf("queue 1 offset after the reset: %d", off)
	}

	// Nobody is connected.
	if r := invoke(t, c, rmq.GetConsumerConnectionList, map[string]string{"consumerGroup": "CG"}, nil); r.Code != rmq.ConsumerNotOnline {
		t.Fatalf("connections of an offline group: %d", r.Code)
	}
	if r := invoke(t, c, rmq.GetProducerConnectionList, map[string]string{"producerGroup": "PG"}, nil); r.Code != rmq.SystemError {
		t.Fatalf("connections of an offline producer group: %d", r.Code)
	}
	// Broker configuration changes only in its runtime keys (a path is
	// refused); unknown codes are refused, the connection stays.
	if r := invoke(t, c, rmq.UpdateBrokerConfig, nil, []byte("storePathRootDir=/tmp/x")); r.Code != rmq.NoPermission || r.Remark == "" {
		t.Fatalf("UPDATE_BROKER_CONFIG: %d %q", r.Code, r.Remark)
	}
	if r := invoke(t, c, rmq.WipeWritePermOfBroker, nil, nil); r.Code != rmq.RequestCodeNotSupported {
		t.Fatalf("an admin code Bolide does not serve: %d", r.Code)
	}
	wantOK(t, invoke(t, c, rmq.GetBrokerRuntimeInfo, nil, nil))
}

func TestAdminConnectionsAndResetNotice(t *testing.T) {
	b, admin := adminBroker(t)
	if err := b.CreateTopic(broker.TopicConfig{Name: "orders", ReadQueueNums: 2, WriteQueueNums: 2}, false); err != nil {
		t.Fatal(err)
	}
	calls := make(brokerCalls, 16)
	client := dialBroker(t, b.Addr(), calls)
	wantOK(t, invoke(t, client, rmq.HeartBeat, nil, goHeartbeat("10.0.0.1@1", "PG", "CG", "orders")))

	resp := wantOK(t, invoke(t, admin, rmq.GetConsumerConnectionList, map[string]string{"consumerGroup": "CG"}, nil))
	var cc struct {
		ConnectionSet []struct {
			ClientID, ClientAddr, Language string
		} `json:"connectionSet"`
		SubscriptionTable map[string]struct {
			SubString string   `json:"subString"`
			TagsSet   []string `json:"tagsSet"`
			CodeSet   []int32  `json:"codeSet"`
		} `json:"subscriptionTable"`
		ConsumeType, MessageModel string
	}
	if err := json.Unmarshal(resp.Body, &cc); err != nil {
		t.Fatal(err)
	}
	// The language is what the client's heartbeat header said (GO here).
	if len(cc.ConnectionSet) != 1 || cc.ConnectionSet[0].ClientID != "10.0.0.1@1" || cc.ConnectionSet[0].ClientAddr != client.LocalAddr().String() ||
		cc.ConnectionSet[0].Language != "GO" {
		t.Fatalf("connections: %+v (client at %s)", cc.ConnectionSet, client.LocalAddr())
	}
	if s := cc.SubscriptionTable["orders"]; s.SubString != "TagA || TagB" || len(s.TagsSet) != 2 || s.CodeSet[0] != 2598919 ||
		cc.ConsumeType != "CONSUME_PASSIVELY" || cc.MessageModel != "CLUSTERING" {
		t.Fatalf("subscriptions: %s", resp.Body)
	}
	resp = wantOK(t, invoke(t, admin, rmq.GetProducerConnectionList, map[string]string{"producerGroup": "PG"}, nil))
	if !strings.Contains(string(resp.Body), `"clientId":"10.0.0.1@1"`) {
		t.Fatalf("producer connections: %s", resp.Body)
	}

	// A reset reaches the group's consumer as RESET_CONSUMER_CLIENT_OFFSET.
	resp = wantOK(t, invoke(t, admin, rmq.InvokeBrokerToResetOffset, map[string]string{"group": "CG", "topic": "orders",
		"timestamp": "-1", "isForce": "true", "offset": "-1"}, nil))
	notice := calls.next(t, rmq.ResetConsumerClientOffset, 5*time.Second)
	if notice.String("group") != "CG" || notice.String("topic") != "orders" || notice.String("timestamp") != "-1" ||
		string(notice.Body) != string(resp.Body) {
		t.Fatalf("reset notice %v %s, reply %s", notice.Ext, notice.Body, resp.Body)
	}
}

func TestAdminTopicAttributes(t *testing.T) {
	_, c := adminBroker(t)
	update := func(attrs string) *rmq.Command {
		return invoke(t, c, rmq.UpdateAndCreateTopic, map[string]string{"topic": "AttrT", "defaultTopic": "TBW102",
			"readQueueNums": "1", "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG", "attributes": attrs}, nil)
	}
	wantOK(t, update("+a=1,+b=2"))
	wantOK(t, update("-a,+c=3"))
	resp := wantOK(t, invoke(t, c, rmq.GetTopicConfig, map[string]string{"topic": "AttrT"}, nil))
	var tc struct {
		TopicName  string            `json:"topicName"`
		Attributes map[string]string `json:"attributes"`
	}
	if err := json.Unmarshal(resp.Body, &tc); err != nil {
		t.Fatal(err)
	}
	if tc.TopicName != "AttrT" || len(tc.Attributes) != 2 || tc.Attributes["b"] != "2" || tc.Attributes["c"] != "3" {
		t.Fatalf("attributes after +a=1,+b=2 then -a,+c=3: %s", resp.Body)
	}
	if r := update("a=1"); r.Code != rmq.InvalidParameter {
		t.Fatalf("an attribute without + or -: %d %q", r.Code, r.Remark)
	}
	if r := invoke(t, c, rmq.UpdateAndCreateTopic, map[string]string{"topic": "bad topic!", "readQueueNums": "1", "writeQueueNums": "1"}, nil); r.Code != rmq.InvalidParameter {
		t.Fatalf("an illegal topic name: %d %q", r.Code, r.Remark)
	}
	if r := invoke(t, c, rmq.UpdateAndCreateTopic, map[string]string{"topic": "NoQueues"}, nil); r.Code != rmq.InvalidParameter {
		t.Fatalf("no queue counts: %d %q", r.Code, r.Remark)
	}
}
