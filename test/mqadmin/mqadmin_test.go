// Package mqadmin checks Apache RocketMQ's own admin tool (mqadmin, from
// org.apache.rocketmq:rocketmq-tools) against a Bolide cluster: each
// command the compatibility issue lists is run with java -cp against a
// NameServer and a broker started in this process, and its output is
// checked for the values the cluster holds.
//
// The cluster has two broker groups, so that every command gathers from
// more than one broker. Each mqadmin run costs about 1.5 s of JVM start
// and 3 s of the client's shutdown (its Netty event thread polls every
// 3 s), mostly idle: the commands that only read run a few at a time.
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
	"github.com/bolide-mq/bolide/internal/cluster"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/message"
)

const (
	topic         = "MqaTopic"
	consumerGroup = "MqaGroup"
	producerGroup = "MqaProducer"
	clientID      = "127.0.0.1@mqadmin-test"
	brokers       = 2
	queues        = 4
	messages      = 10
	// parallelRuns bounds the mqadmin JVMs running at once.
	parallelRuns = 4
)

// tool runs mqadmin commands.
type tool struct {
	cp   string
	ns   string
	home string
	sem  chan struct{}
}

// run runs one mqadmin command against the cluster's NameServer and
// returns its output (stdout and stderr); a command that fails or prints
// an exception fails t.
func (m *tool) run(t *testing.T, args ...string) string {
	t.Helper()
	m.sem <- struct{}{}
	defer func() { <-m.sem }()
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
	t.Logf("mqadmin %s (%v):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Errorf("mqadmin %s: %v", args[0], err)
	}
	if s := out.String(); strings.Contains(s, "command failed") || strings.Contains(s, "Exception") {
		t.Errorf("mqadmin %s failed", args[0])
	}
	return out.String()
}

// runRefused runs an mqadmin command the broker must refuse and returns
// its output; a command that succeeds fails t.
func (m *tool) runRefused(t *testing.T, args ...string) string {
	t.Helper()
	m.sem <- struct{}{}
	defer func() { <-m.sem }()
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
	err := cmd.Run()
	t.Logf("mqadmin %s (refusal expected, exit %v):\n%s", strings.Join(args, " "), err, out.String())
	if !strings.Contains(out.String(), "command failed") {
		t.Errorf("mqadmin %s was not refused", args[0])
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

// connectClient makes a RocketMQ client as far as a broker can tell: a
// remoting connection that sent a heartbeat naming a producer group and a
// consumer group, and answers nothing the broker asks.
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
	broker                    int
	queue                     int32
	queueOffset               int64
}

// sendMessages stores message i on broker i%2, queue (i/2)%4.
func sendMessages(t *testing.T, c *cluster.Cluster) []sent {
	t.Helper()
	gen := message.NewUniqueIDGenerator(netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	var out []sent
	for i := 0; i < messages; i++ {
		s := sent{body: fmt.Sprintf("mqadmin-body-%02d", i), key: fmt.Sprintf("mqa-key-%d", i%3), uniq: gen.Next(),
			broker: i % brokers, queue: int32(i / brokers % queues)}
		tag := "TagA"
		if i%3 == 1 {
			tag = "TagB"
		}
		m := &message.Ext{Message: message.Message{Topic: topic, Body: []byte(s.body), Properties: map[string]string{
			message.PropertyKeys: s.key, message.PropertyUniqueKey: s.uniq, message.PropertyTags: tag}}, QueueID: s.queue}
		res, err := c.Broker(s.broker).Send(context.Background(), []*message.Ext{m})
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

	c := cluster.Start(t, cluster.Options{BrokerGroups: brokers})
	var addr, name [brokers]string
	for i := range brokers {
		addr[i], name[i] = c.Broker(i).Addr(), c.Broker(i).Options().BrokerName
	}
	clusterName := c.Broker(0).Options().Cluster
	m := &tool{cp: strings.TrimSpace(string(cp)), ns: c.NameServerAddrs()[0], home: t.TempDir(), sem: make(chan struct{}, parallelRuns)}

	c.CreateTopic(topic, queues)
	msgs := sendMessages(t, c)
	// stored[b][q] is how many messages queue q of broker b holds.
	var stored [brokers][queues]int64
	for _, s := range msgs {
		stored[s.broker][s.queue]++
	}
	for i := range brokers {
		connectClient(t, addr[i])
	}
	// The group consumed: on broker-a 1 message of queue 0, on broker-b all
	// of queues 0 and 1.
	consumed := [brokers][queues]int64{{1, 0, 0, 0}, {stored[1][0], stored[1][1], 0, 0}}
	for i := range brokers {
		var offs []broker.QueueOffset
		for q := int32(0); q < queues; q++ {
			if consumed[i][q] > 0 {
				offs = append(offs, broker.QueueOffset{Queue: broker.Queue{Topic: topic, ID: q}, Offset: consumed[i][q]})
			}
		}
		if err := c.Broker(i).CommitOffsets(consumerGroup, offs); err != nil {
			t.Fatal(err)
		}
	}
	// Queues and the index are written by dispatch after the send.
	c.WaitFor(10*time.Second, func() error {
		for i := range brokers {
			for q := int32(0); q < queues; q++ {
				st, err := c.Broker(i).QueueState(topic, q)
				if err != nil {
					return err
				}
				if st.MaxOffset != stored[i][q] {
					return fmt.Errorf("%s queue %d: max offset %d, want %d", name[i], q, st.MaxOffset, stored[i][q])
				}
			}
		}
		return nil
	})
	// The heartbeats made the group's retry topic; it must be routed.
	c.CreateTopic("%RETRY%"+consumerGroup, 1)

	// Commands that change nothing, a few at a time.
	t.Run("read", func(t *testing.T) {
		t.Run("clusterList", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "clusterList")
			for i := range brokers {
				expect(t, "clusterList", out, `(?m)^`+clusterName+`\s+`+name[i]+`\s+0\s+`+regexp.QuoteMeta(addr[i])+`\s+\S+\s+`)
			}
		})
		t.Run("topicList", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "topicList")
			expect(t, "topicList", out, `(?m)^`+topic+`$`, `(?m)^%RETRY%`+consumerGroup+`$`)
		})
		t.Run("topicRoute", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "topicRoute", "-t", topic)
			for i := range brokers {
				expect(t, "topicRoute", out, `"brokerName"\s*:\s*"`+name[i]+`"`, regexp.QuoteMeta(addr[i]))
			}
			expect(t, "topicRoute", out, `"readQueueNums"\s*:\s*4`, `"writeQueueNums"\s*:\s*4`, `"perm"\s*:\s*6`)
		})
		t.Run("topicStatus", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "topicStatus", "-t", topic)
			for i := range brokers {
				for q := 0; q < queues; q++ {
					expect(t, "topicStatus", out, fmt.Sprintf(`(?m)^%s\s+%d\s+0\s+%d\s+\d{4}-\d\d-\d\d`, name[i], q, stored[i][q]))
				}
			}
		})
		t.Run("brokerStatus", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "brokerStatus", "-b", addr[1])
			// The core's counters and rates (the test stored the messages
			// less than a minute ago: the put rate is above 0).
			expect(t, "brokerStatus", out, `msgPutTotalTodayNow\s*:\s*`+strconv.Itoa(messages/brokers)+`\s`,
				`brokerActive\s*:\s*true`, `brokerName\s*:\s*`+name[1], `commitLogMaxOffset\s*:\s*[1-9]`,
				`putTps\s*:\s*0*[1-9][0-9]*\.\d\d\s|putTps\s*:\s*0\.(0[1-9]|[1-9]\d)\s`, `getTransferredTps\s*:\s*\d+\.\d\d\s`,
				`commitLogDirCapacity\s*:\s*Total : `, `brokerPermission\s*:\s*6\s`)
		})
		t.Run("getBrokerConfig", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "getBrokerConfig", "-b", addr[0])
			expect(t, "getBrokerConfig", out, `(?m)^brokerName\s+=\s+`+name[0]+`\s*$`,
				`(?m)^brokerClusterName\s+=\s+`+clusterName+`\s*$`, `(?m)^fileReservedTime\s+=\s+\d+\s*$`,
				`(?m)^maxMessageSize\s+=\s+\d+\s*$`, `(?m)^brokerPermission\s+=\s+6\s*$`)
			out = m.run(t, "getBrokerConfig", "-c", clusterName)
			for i := range brokers {
				expect(t, "getBrokerConfig -c", out, `Master: `+regexp.QuoteMeta(addr[i]), `(?m)^brokerName\s+=\s+`+name[i]+`\s*$`)
			}
		})
		t.Run("consumerProgress", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "consumerProgress", "-g", consumerGroup)
			var total int64
			for i := range brokers {
				for q := 0; q < queues; q++ {
					diff := stored[i][q] - consumed[i][q]
					total += diff
					expect(t, "consumerProgress", out, fmt.Sprintf(`(?m)^%s\s+%s\s+%d\s+%d\s+%d\s+%d\s`,
						topic, name[i], q, stored[i][q], consumed[i][q], diff))
				}
			}
			expect(t, "consumerProgress", out, `Consume Diff Total: `+strconv.FormatInt(total, 10))
			// Without a group: every group with a retry topic, with its
			// connected clients (one per broker) and its lag.
			out = m.run(t, "consumerProgress")
			expect(t, "consumerProgress (all)", out, `(?m)^`+consumerGroup+`\s+1\s+\S+\s+PUSH\s+CLUSTERING\s+0\s+`+strconv.FormatInt(total, 10)+`\s*$`)
		})
		t.Run("consumerConnection", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "consumerConnection", "-g", consumerGroup)
			expect(t, "consumerConnection", out, `(?m)^`+regexp.QuoteMeta(clientID)+`\s+127\.0\.0\.1:\d+\s`,
				`(?m)^`+topic+`\s+TagA \|\| TagB\s*$`, `ConsumeType: CONSUME_PASSIVELY`, `MessageModel: CLUSTERING`)
		})
		t.Run("producerConnection", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "producerConnection", "-g", producerGroup, "-t", topic)
			expect(t, "producerConnection", out, `(?m)^0001\s+`+regexp.QuoteMeta(clientID)+`\s+127\.0\.0\.1:\d+\s`)
		})
		t.Run("queryMsgById", func(t *testing.T) {
			t.Parallel()
			s := msgs[5] // on broker-b: the id's address says so
			out := m.run(t, "queryMsgById", "-t", topic, "-i", s.offsetID, "-f", "UTF-8")
			expect(t, "queryMsgById", out, `OffsetID:\s+`+s.offsetID+`\s`, `Topic:\s+`+topic+`\s`, `Keys:\s+\[`+s.key+`\]`,
				`Queue ID:\s+`+strconv.Itoa(int(s.queue))+`\s`, `Queue Offset:\s+`+strconv.FormatInt(s.queueOffset, 10)+`\s`,
				`Store Host:\s+`+regexp.QuoteMeta(addr[s.broker])+`\s`, `Message Body:\s+`+s.body+`\s`, `UNIQ_KEY=`+s.uniq)
		})
		t.Run("queryMsgByKey", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "queryMsgByKey", "-t", topic, "-k", "mqa-key-1")
			n := 0
			for _, s := range msgs {
				if s.key == "mqa-key-1" {
					n++
					// 5.5.0 adds an #IndexKey column it makes itself.
					expect(t, "queryMsgByKey", out, `(?m)^`+s.uniq+`\s+`+strconv.Itoa(int(s.queue))+`\s+`+strconv.FormatInt(s.queueOffset, 10)+`\s`)
				}
			}
			if got := len(regexp.MustCompile(`(?m)^[0-9A-F]{32}\s`).FindAllString(out, -1)); got != n {
				t.Errorf("queryMsgByKey listed %d messages, want %d", got, n)
			}
		})
		t.Run("queryMsgByUniqueKey", func(t *testing.T) {
			t.Parallel()
			s := msgs[7]
			out := m.run(t, "queryMsgByUniqueKey", "-t", topic, "-i", s.uniq)
			expect(t, "queryMsgByUniqueKey", out, `Topic:\s+`+topic+`\s`, `Keys:\s+\[`+s.key+`\]`, `Tags:\s+\[TagB\]`,
				`Queue ID:\s+`+strconv.Itoa(int(s.queue))+`\s`, `Queue Offset:\s+`+strconv.FormatInt(s.queueOffset, 10)+`\s`,
				`UNIQ_KEY=`+s.uniq)
		})
		t.Run("queryMsgByOffset", func(t *testing.T) {
			t.Parallel()
			s := msgs[9] // broker-b, queue 0, offset 1
			out := m.run(t, "queryMsgByOffset", "-t", topic, "-b", name[s.broker], "-i", strconv.Itoa(int(s.queue)),
				"-o", strconv.FormatInt(s.queueOffset, 10), "-f", "UTF-8")
			expect(t, "queryMsgByOffset", out, `OffsetID:\s+`+s.offsetID+`\s`, `Message Body:\s+`+s.body+`\s`,
				`Queue ID:\s+`+strconv.Itoa(int(s.queue))+`\s`, `Queue Offset:\s+`+strconv.FormatInt(s.queueOffset, 10)+`\s`)
		})
	})

	// Commands that change the cluster.
	t.Run("write", func(t *testing.T) {
		t.Run("updateTopic+deleteTopic", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "updateTopic", "-b", addr[0], "-t", "MqaNewTopic", "-r", "3", "-w", "3")
			expect(t, "updateTopic", out, `create topic to `+regexp.QuoteMeta(addr[0])+` success`, `readQueueNums=3`)
			out = m.run(t, "updateTopic", "-c", clusterName, "-t", "MqaClusterTopic", "-r", "2", "-w", "2", "-p", "6")
			for i := range brokers {
				expect(t, "updateTopic -c", out, `create topic to `+regexp.QuoteMeta(addr[i])+` success`)
			}
			queuesOf := func(i int, name string) int32 {
				for _, tc := range c.Broker(i).TopicConfigs() {
					if tc.Name == name {
						return tc.WriteQueueNums
					}
				}
				return 0
			}
			if queuesOf(0, "MqaNewTopic") != 3 || queuesOf(1, "MqaNewTopic") != 0 || queuesOf(0, "MqaClusterTopic") != 2 || queuesOf(1, "MqaClusterTopic") != 2 {
				t.Errorf("after updateTopic: MqaNewTopic %d/%d queues, MqaClusterTopic %d/%d", queuesOf(0, "MqaNewTopic"),
					queuesOf(1, "MqaNewTopic"), queuesOf(0, "MqaClusterTopic"), queuesOf(1, "MqaClusterTopic"))
			}
			out = m.run(t, "deleteTopic", "-c", clusterName, "-t", "MqaClusterTopic")
			expect(t, "deleteTopic", out, `delete topic \[MqaClusterTopic\] from cluster \[`+clusterName+`\] success`,
				`delete topic \[MqaClusterTopic\] from NameServer success`)
			if queuesOf(0, "MqaClusterTopic") != 0 || queuesOf(1, "MqaClusterTopic") != 0 {
				t.Error("MqaClusterTopic is still on a broker")
			}
		})
		t.Run("updateSubGroup+deleteSubGroup", func(t *testing.T) {
			t.Parallel()
			out := m.run(t, "updateSubGroup", "-c", clusterName, "-g", "MqaSubGroup", "-r", "5", "-o", "true")
			for i := range brokers {
				expect(t, "updateSubGroup", out, `create subscription group to `+regexp.QuoteMeta(addr[i])+` success`)
				g, ok := c.Broker(i).LookupSubscriptionGroup("MqaSubGroup")
				if !ok || g.RetryMaxTimes != 5 || !g.ConsumeMessageOrderly {
					t.Errorf("MqaSubGroup on %s: %+v %v", name[i], g, ok)
				}
			}
			expect(t, "updateSubGroup", out, `groupName=MqaSubGroup`, `retryMaxTimes=5`)
			out = m.run(t, "deleteSubGroup", "-b", addr[1], "-g", "MqaSubGroup")
			expect(t, "deleteSubGroup", out, `delete subscription group \[MqaSubGroup\] from broker \[`+regexp.QuoteMeta(addr[1])+`\] success`)
			if _, ok := c.Broker(1).LookupSubscriptionGroup("MqaSubGroup"); ok {
				t.Errorf("MqaSubGroup is still on %s", name[1])
			}
			if _, ok := c.Broker(0).LookupSubscriptionGroup("MqaSubGroup"); !ok {
				t.Errorf("deleteSubGroup -b %s deleted MqaSubGroup from %s too", addr[1], name[0])
			}
			// With -c: from every master, and the group's retry and
			// dead-letter topics go too.
			out = m.run(t, "deleteSubGroup", "-c", clusterName, "-g", "MqaSubGroup")
			for i := range brokers {
				expect(t, "deleteSubGroup -c", out, `delete subscription group \[MqaSubGroup\] from broker \[`+regexp.QuoteMeta(addr[i])+
					`\] in cluster \[`+clusterName+`\] success`)
				if _, ok := c.Broker(i).LookupSubscriptionGroup("MqaSubGroup"); ok {
					t.Errorf("MqaSubGroup is still on %s", name[i])
				}
			}
		})
		t.Run("updateBrokerConfig", func(t *testing.T) {
			t.Parallel()
			limit := func(i int) string {
				for _, e := range c.Broker(i).Config() {
					if e.Key == "maxMessageSize" {
						return e.Value
					}
				}
				return ""
			}
			before := limit(1)
			out := m.run(t, "updateBrokerConfig", "-b", addr[0], "-k", "maxMessageSize", "-v", "3145728")
			expect(t, "updateBrokerConfig", out, `update broker config success, `+regexp.QuoteMeta(addr[0]))
			if limit(0) != "3145728" || limit(1) != before {
				t.Errorf("after updateBrokerConfig -b %s: maxMessageSize %s on %s, %s on %s (was %s)", addr[0], limit(0), name[0], limit(1), name[1], before)
			}
			out = m.run(t, "getBrokerConfig", "-b", addr[0])
			expect(t, "getBrokerConfig after the update", out, `(?m)^maxMessageSize\s+=\s+3145728\s*$`)
			// A key that may not change at runtime: refused, naming it and
			// the keys allowed; nothing changes.
			out = m.runRefused(t, "updateBrokerConfig", "-b", addr[0], "-k", "storePathRootDir", "-v", "/tmp/elsewhere")
			expect(t, "updateBrokerConfig storePathRootDir", out, `CODE: 16`, `storePathRootDir may not be changed at runtime`,
				`maxMessageSize`)
			if dir := c.Broker(0).Options().StoreDir; !strings.Contains(m.run(t, "getBrokerConfig", "-b", addr[0]), dir) {
				t.Errorf("storePathRootDir is no longer %s", dir)
			}
			// A value the broker does not take: refused too.
			out = m.runRefused(t, "updateBrokerConfig", "-b", addr[0], "-k", "maxMessageSize", "-v", "12")
			expect(t, "updateBrokerConfig maxMessageSize=12", out, `CODE: 29`, `maxMessageSize=12`)
			if limit(0) != "3145728" {
				t.Errorf("a refused value changed maxMessageSize to %s", limit(0))
			}
		})
		t.Run("resetOffsetByTime", func(t *testing.T) {
			t.Parallel()
			// Back to the start: every queue of the group goes to 0.
			out := m.run(t, "resetOffsetByTime", "-g", consumerGroup, "-t", topic, "-s", "0")
			for i := range brokers {
				for q := int32(0); q < queues; q++ {
					expect(t, "resetOffsetByTime", out, fmt.Sprintf(`(?m)^%s\s+%d\s+0\s*$`, name[i], q))
					if off, _ := c.Broker(i).QueryOffset(consumerGroup, topic, q); off != 0 {
						t.Errorf("%s queue %d offset after the reset: %d", name[i], q, off)
					}
				}
			}
			// To now: every queue to its end.
			out = m.run(t, "resetOffsetByTime", "-g", consumerGroup, "-t", topic, "-s", "now")
			for i := range brokers {
				for q := int32(0); q < queues; q++ {
					expect(t, "resetOffsetByTime now", out, fmt.Sprintf(`(?m)^%s\s+%d\s+%d\s*$`, name[i], q, stored[i][q]))
					if off, _ := c.Broker(i).QueryOffset(consumerGroup, topic, q); off != stored[i][q] {
						t.Errorf("%s queue %d offset after the reset to now: %d, want %d", name[i], q, off, stored[i][q])
					}
				}
			}
		})
	})
}
