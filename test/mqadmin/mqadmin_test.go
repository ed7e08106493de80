// Package mqadmin checks Apache RocketMQ's own admin tool (mqadmin, from
// org.apache.rocketmq:rocketmq-tools) against a Bolide cluster: each
// command the compatibility issue lists is run with java -cp against a
// NameServer and a broker started in this process, and its output is
// checked for the values the cluster holds.
//
// The test needs java and the tool's class path: scripts/compat-mqadmin.sh
// resolves it with Maven (pom.xml here) into a file and runs the test with
// BOLIDE_MQADMIN_CP naming that file. Without it the test is skipped.
package mqadmin

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/cluster"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/message"
)

const (
	topic         = "MqaTopic"
	consumerGroup = "MqaGroup"
	producerGroup = "MqaProducer"
	clientID      = "127.0.0.1@mqadmin-test"
	queues        = 4
	messages      = 10
)

// tool runs mqadmin commands.
type tool struct {
	t    *testing.T
	cp   string
	ns   string
	home string
}

// run runs one mqadmin command against the cluster's NameServer and
// returns its output (stdout and stderr).
func (m *tool) run(args ...string) string {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	jargs := []string{"-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Duser.home=" + m.home, "-Drocketmq.client.logUseSlf4j=false",
		"-cp", m.cp, "org.apache.rocketmq.tools.command.MQAdminStartup"}
	jargs = append(jargs, args...)
	jargs = append(jargs, "-n", m.ns)
	cmd := exec.CommandContext(ctx, "java", jargs...)
	cmd.Dir = m.home
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	m.t.Logf("mqadmin %s (%v):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		m.t.Errorf("mqadmin %s: %v", args[0], err)
	}
	if s := out.String(); strings.Contains(s, "command failed") || strings.Contains(s, "Exception") {
		m.t.Errorf("mqadmin %s failed", args[0])
	}
	return out.String()
}

// expect checks that out matches each regular expression.
func expect(t *testing.T, cmd, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("%s: output does not match %q", cmd, p)
		}
	}
}

// client is a RocketMQ client as far as the broker can tell: a remoting
// connection that sent a heartbeat naming a producer group and a consumer
// group, and answers nothing the broker asks.
func connectClient(t *testing.T, addr string) *rmq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := rmq.Dial(ctx, addr, rmq.HandlerFunc(func(context.Context, *rmq.Conn, *rmq.Command) *rmq.Command { return nil }), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hb := fmt.Sprintf(`{"clientID":%q,"producerDataSet":[{"groupName":%q}],"consumerDataSet":[{"groupName":%q,`+
		`"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",`+
		`"subscriptionDataSet":[{"classFilterMode":false,"topic":%q,"subString":"TagA || TagB","tagsSet":["TagA","TagB"],`+
		`"codeSet":[2598919,2598920],"subVersion":1733050000000,"expressionType":"TAG"}],"unitMode":false}]}`,
		clientID, producerGroup, consumerGroup, topic)
	resp, err := conn.Invoke(ctx, rmq.NewRequest(rmq.HeartBeat, nil, []byte(hb)))
	if err != nil || resp.Code != rmq.Success {
		t.Fatalf("heartbeat: %v %+v", err, resp)
	}
	return conn
}

// sent is a message the test stored.
type sent struct {
	body, key, uniq, offsetID string
	queue                     int32
	queueOffset               int64
}

func sendMessages(t *testing.T, b *server.Server) []sent {
	t.Helper()
	gen := message.NewUniqueIDGenerator(netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	var out []sent
	for i := 0; i < messages; i++ {
		s := sent{body: fmt.Sprintf("mqadmin-body-%02d", i), key: fmt.Sprintf("mqa-key-%d", i%3), uniq: gen.Next(), queue: int32(i % queues)}
		tag := "TagA"
		if i%2 == 1 {
			tag = "TagB"
		}
		m := &message.Ext{Message: message.Message{Topic: topic, Body: []byte(s.body), Properties: map[string]string{
			message.PropertyKeys: s.key, message.PropertyUniqueKey: s.uniq, message.PropertyTags: tag}}, QueueID: s.queue}
		res, err := b.Send(context.Background(), []*message.Ext{m})
		if err != nil {
			t.Fatal(err)
		}
		s.offsetID, s.queueOffset = res[0].MsgID, res[0].QueueOffset
		out = append(out, s)
	}
	return out
}

func TestMQAdmin(t *testing.T) {
	cpFile := os.Getenv("BOLIDE_MQADMIN_CP")
	if cpFile == "" {
		t.Skip("BOLIDE_MQADMIN_CP is not set: run scripts/compat-mqadmin.sh, which resolves mqadmin's class path (rocketmq-tools 5.5.0) with Maven")
	}
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatalf("BOLIDE_MQADMIN_CP: %v", err)
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatal("java is not on PATH")
	}

	c := cluster.Start(t, cluster.Options{})
	b := c.Broker(0)
	ns := c.NameServerAddrs()[0]
	baddr, bname, clusterName := b.Addr(), b.Options().BrokerName, b.Options().Cluster
	m := &tool{t: t, cp: strings.TrimSpace(string(cp)), ns: ns, home: t.TempDir()}

	c.CreateTopic(topic, queues)
	msgs := sendMessages(t, b)
	connectClient(t, baddr)
	// The group has consumed queue 0 up to 2 and queue 1 up to 1.
	if err := b.CommitOffsets(consumerGroup, []broker.QueueOffset{
		{Queue: broker.Queue{Topic: topic, ID: 0}, Offset: 2}, {Queue: broker.Queue{Topic: topic, ID: 1}, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	// Queues and the index are written by dispatch; the retry topic the
	// heartbeat created must reach the NameServer.
	c.WaitFor(10*time.Second, func() error {
		for q := int32(0); q < queues; q++ {
			st, err := b.QueueState(topic, q)
			if err != nil {
				return err
			}
			if want := int64((messages - int(q) + queues - 1) / queues); st.MaxOffset != want {
				return fmt.Errorf("queue %d max offset %d, want %d", q, st.MaxOffset, want)
			}
		}
		return nil
	})
	c.CreateTopic("%RETRY%"+consumerGroup, 1)

	t.Run("clusterList", func(t *testing.T) {
		out := m.run("clusterList")
		expect(t, "clusterList", out, `#Cluster Name`, clusterName+`\s+`+bname+`\s+0\s+`+regexp.QuoteMeta(baddr))
	})
	t.Run("topicList", func(t *testing.T) {
		out := m.run("topicList")
		expect(t, "topicList", out, `(?m)^`+topic+`$`, `(?m)^%RETRY%`+consumerGroup+`$`)
	})
	t.Run("topicRoute", func(t *testing.T) {
		out := m.run("topicRoute", "-t", topic)
		expect(t, "topicRoute", out, `"brokerName"\s*:\s*"`+bname+`"`, `"readQueueNums"\s*:\s*4`, `"writeQueueNums"\s*:\s*4`,
			regexp.QuoteMeta(baddr))
	})
	t.Run("topicStatus", func(t *testing.T) {
		out := m.run("topicStatus", "-t", topic)
		for q := 0; q < queues; q++ {
			max := (messages - q + queues - 1) / queues
			expect(t, "topicStatus", out, fmt.Sprintf(`(?m)^%s\s+%d\s+0\s+%d\s+\d{4}-`, bname, q, max))
		}
	})
	t.Run("brokerStatus", func(t *testing.T) {
		out := m.run("brokerStatus", "-b", baddr)
		expect(t, "brokerStatus", out, `msgPutTotalTodayNow\s*:\s*`+strconv.Itoa(messages)+`\b`, `brokerActive\s*:\s*true`,
			`commitLogMaxOffset\s*:\s*[1-9]`)
	})
	t.Run("updateTopic", func(t *testing.T) {
		out := m.run("updateTopic", "-b", baddr, "-t", "MqaNewTopic", "-r", "3", "-w", "3")
		expect(t, "updateTopic", out, `create topic to `+regexp.QuoteMeta(baddr)+` success`)
		out = m.run("updateTopic", "-c", clusterName, "-t", "MqaClusterTopic", "-r", "2", "-w", "2", "-p", "6")
		expect(t, "updateTopic -c", out, `create topic to `+regexp.QuoteMeta(baddr)+` success`)
		got := map[string]int32{}
		for _, tc := range b.TopicConfigs() {
			got[tc.Name] = tc.WriteQueueNums
		}
		if got["MqaNewTopic"] != 3 || got["MqaClusterTopic"] != 2 {
			t.Errorf("topics after updateTopic: %v", got)
		}
	})
	t.Run("deleteTopic", func(t *testing.T) {
		out := m.run("deleteTopic", "-c", clusterName, "-t", "MqaClusterTopic")
		expect(t, "deleteTopic", out, `delete topic \[MqaClusterTopic\] from cluster \[`+clusterName+`\] success`,
			`delete topic \[MqaClusterTopic\] from NameServer success`)
		for _, tc := range b.TopicConfigs() {
			if tc.Name == "MqaClusterTopic" {
				t.Error("MqaClusterTopic is still on the broker")
			}
		}
	})
	t.Run("updateSubGroup", func(t *testing.T) {
		out := m.run("updateSubGroup", "-b", baddr, "-g", "MqaSubGroup", "-r", "5", "-o", "true")
		expect(t, "updateSubGroup", out, `create subscription group to `+regexp.QuoteMeta(baddr)+` success`, `groupName=MqaSubGroup`)
		g, ok := b.LookupSubscriptionGroup("MqaSubGroup")
		if !ok || g.RetryMaxTimes != 5 || !g.ConsumeMessageOrderly {
			t.Errorf("MqaSubGroup on the broker: %+v %v", g, ok)
		}
	})
	t.Run("deleteSubGroup", func(t *testing.T) {
		out := m.run("deleteSubGroup", "-b", baddr, "-g", "MqaSubGroup")
		expect(t, "deleteSubGroup", out, `delete subscription group \[MqaSubGroup\] from broker \[`+regexp.QuoteMeta(baddr)+`\] success`)
		if _, ok := b.LookupSubscriptionGroup("MqaSubGroup"); ok {
			t.Error("MqaSubGroup is still on the broker")
		}
	})
	t.Run("consumerProgress", func(t *testing.T) {
		out := m.run("consumerProgress", "-g", consumerGroup)
		// queue 0: 3 stored, 2 consumed; queue 1: 3 and 1; queue 2: 2 and 0.
		expect(t, "consumerProgress", out,
			`(?m)^`+topic+`\s+`+bname+`\s+0\s+3\s+2\s+1\b`,
			`(?m)^`+topic+`\s+`+bname+`\s+1\s+3\s+1\s+2\b`,
			`(?m)^`+topic+`\s+`+bname+`\s+2\s+2\s+0\s+2\b`,
			`Consume Diff Total: 7`)
		out = m.run("consumerProgress")
		expect(t, "consumerProgress (all)", out, `(?m)^`+consumerGroup+`\s+1\s+`)
	})
	t.Run("consumerConnection", func(t *testing.T) {
		out := m.run("consumerConnection", "-g", consumerGroup)
		expect(t, "consumerConnection", out, regexp.QuoteMeta(clientID)+`\s+127\.0\.0\.1:\d+`,
			`(?m)^`+topic+`\s+TagA \|\| TagB`, `ConsumeType: CONSUME_PASSIVELY`, `MessageModel: CLUSTERING`)
	})
	t.Run("producerConnection", func(t *testing.T) {
		out := m.run("producerConnection", "-g", producerGroup, "-t", topic)
		expect(t, "producerConnection", out, `0001\s+`+regexp.QuoteMeta(clientID)+`\s+127\.0\.0\.1:\d+`)
	})
	t.Run("queryMsgById", func(t *testing.T) {
		s := msgs[4]
		out := m.run("queryMsgById", "-t", topic, "-i", s.offsetID, "-f", "UTF-8")
		expect(t, "queryMsgById", out, `OffsetID:\s+`+s.offsetID, `Topic:\s+`+topic, `Keys:\s+\[`+s.key+`\]`,
			`Queue ID:\s+`+strconv.Itoa(int(s.queue)), `Queue Offset:\s+`+strconv.FormatInt(s.queueOffset, 10),
			`Message Body:\s+`+s.body, `UNIQ_KEY=`+s.uniq)
	})
	t.Run("queryMsgByKey", func(t *testing.T) {
		out := m.run("queryMsgByKey", "-t", topic, "-k", "mqa-key-1")
		n := 0
		for _, s := range msgs {
			if s.key == "mqa-key-1" {
				n++
				// 5.5.0 adds an #IndexKey column it makes itself.
				expect(t, "queryMsgByKey", out, `(?m)^`+s.uniq+`\s+`+strconv.Itoa(int(s.queue))+`\s+`+strconv.FormatInt(s.queueOffset, 10)+`\b`)
			}
		}
		if got := len(regexp.MustCompile(`(?m)^[0-9A-F]{32}\s`).FindAllString(out, -1)); got != n {
			t.Errorf("queryMsgByKey listed %d messages, want %d", got, n)
		}
	})
	t.Run("queryMsgByUniqueKey", func(t *testing.T) {
		s := msgs[7]
		out := m.run("queryMsgByUniqueKey", "-t", topic, "-i", s.uniq)
		expect(t, "queryMsgByUniqueKey", out, `Topic:\s+`+topic, `Keys:\s+\[`+s.key+`\]`, `Tags:\s+\[TagB\]`,
			`Queue Offset:\s+`+strconv.FormatInt(s.queueOffset, 10), `UNIQ_KEY=`+s.uniq)
	})
	t.Run("queryMsgByOffset", func(t *testing.T) {
		s := msgs[6] // queue 2, offset 1
		out := m.run("queryMsgByOffset", "-t", topic, "-b", bname, "-i", strconv.Itoa(int(s.queue)),
			"-o", strconv.FormatInt(s.queueOffset, 10), "-f", "UTF-8")
		expect(t, "queryMsgByOffset", out, `OffsetID:\s+`+s.offsetID, `Message Body:\s+`+s.body,
			`Queue ID:\s+`+strconv.Itoa(int(s.queue)), `Queue Offset:\s+`+strconv.FormatInt(s.queueOffset, 10))
	})
	t.Run("resetOffsetByTime", func(t *testing.T) {
		// Back to the start: every queue of the group goes to 0.
		out := m.run("resetOffsetByTime", "-g", consumerGroup, "-t", topic, "-s", "0")
		for q := 0; q < queues; q++ {
			expect(t, "resetOffsetByTime", out, fmt.Sprintf(`(?m)^%s\s+%d\s+0\s*$`, bname, q))
		}
		for q := int32(0); q < queues; q++ {
			if off, _ := b.QueryOffset(consumerGroup, topic, q); off != 0 {
				t.Errorf("queue %d offset after the reset: %d", q, off)
			}
		}
		// To now: every queue to its end.
		out = m.run("resetOffsetByTime", "-g", consumerGroup, "-t", topic, "-s", "now")
		for q := 0; q < queues; q++ {
			expect(t, "resetOffsetByTime now", out, fmt.Sprintf(`(?m)^%s\s+%d\s+%d\s*$`, bname, q, (messages-q+queues-1)/queues))
		}
	})
}
