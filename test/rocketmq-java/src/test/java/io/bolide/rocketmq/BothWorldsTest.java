package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.junit.jupiter.api.Test;

/**
 * One cluster, both worlds: what the Java client sends, Bolide's own client (the bolide CLI, on the
 * Go SDK) reads with the same ids, keys, tags and properties, and the other way round; offsets one
 * kind of consumer commits, the other goes on from.
 */
class BothWorldsTest extends CompatTest {

    private static final ObjectMapper JSON = new ObjectMapper();

    /** Runs the bolide CLI with -o json; one JSON object per line of its output. */
    private static List<JsonNode> cliJson(Duration timeout, String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of(args));
        all.add("-o");
        all.add("json");
        BolideCluster.CliResult r = cluster.cli(timeout, all.toArray(new String[0]));
        assertEquals(0, r.exitCode(), "bolide " + String.join(" ", all) + ": " + r.output());
        List<JsonNode> out = new ArrayList<>();
        for (String line : r.output().split("\n")) {
            if (line.startsWith("{")) {
                out.add(JSON.readTree(line));
            }
        }
        return out;
    }

    /** bolide consume of topic as group until count messages (or 5 s with nothing new). */
    private static List<JsonNode> bolideConsume(String topic, String group, int count) throws Exception {
        List<String> args = new ArrayList<>(List.of("consume", "--topic", topic, "--group", group, "--timeout", "5s"));
        if (count > 0) {
            args.addAll(List.of("--count", String.valueOf(count)));
        }
        return cliJson(Duration.ofSeconds(60), args.toArray(new String[0]));
    }

    @Test
    void javaProducerBolideConsumer() throws Exception {
        String topic = topic("j2b", 2);
        DefaultMQProducer producer = producer(name("pg"));
        Map<String, SendResult> byId = new LinkedHashMap<>();
        for (int i = 0; i < 4; i++) {
            Message m = new Message(topic, "TagJ", utf8("from java " + i));
            m.setKeys(List.of("jk-" + i, "common"));
            m.putUserProperty("origin", "java");
            m.putUserProperty("seq", String.valueOf(i));
            SendResult sr = producer.send(m);
            byId.put(sr.getMsgId(), sr);
        }
        List<JsonNode> got = bolideConsume(topic, name("bg"), byId.size());
        assertEquals(byId.size(), got.size(), "messages bolide consume printed: " + got);
        for (JsonNode j : got) {
            String id = j.path("msgId").asText();
            SendResult sr = byId.get(id);
            assertNotNull(sr, "bolide's msgId " + id + " is a msgId the Java producer got: " + byId.keySet());
            int seq = Integer.parseInt(j.path("properties").path("seq").asText("-1"));
            assertEquals(sr.getOffsetMsgId(), j.path("offsetMsgId").asText(), "offsetMsgId");
            assertEquals(sr.getMessageQueue().getQueueId(), j.path("queueId").asInt(), "queueId");
            assertEquals(sr.getQueueOffset(), j.path("queueOffset").asLong(), "queueOffset");
            assertEquals("TagJ", j.path("tags").asText(), "tags");
            assertEquals(List.of("jk-" + seq, "common"), JSON.convertValue(j.path("keys"), List.class), "keys");
            assertEquals("java", j.path("properties").path("origin").asText(), "user property origin");
            assertEquals("from java " + seq, j.path("body").asText(), "body");
            assertEquals(0, j.path("reconsumeTimes").asInt(), "reconsumeTimes");
        }
    }

    @Test
    void bolideProducerJavaConsumer() throws Exception {
        String topic = topic("b2j", 2);
        List<JsonNode> sent = cliJson(Duration.ofSeconds(30), "send", "--topic", topic, "--tag", "TagB",
                "--keys", "bk-{{Count}},shared", "--property", "origin=bolide", "--property", "n={{Count}}",
                "--count", "3", "from bolide {{Count}}");
        assertEquals(3, sent.size(), "bolide send results: " + sent);

        Collector c = new Collector();
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, "TagB");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        c.awaitDistinct(sent.size(), Duration.ofSeconds(40));
        for (JsonNode j : sent) {
            String id = j.path("msgId").asText();
            MessageExt m = c.first(id);
            assertNotNull(m, "the Java consumer got bolide's message " + id + "; it got " + c.distinct());
            String n = m.getUserProperty("n");
            assertEquals(id, m.getMsgId(), "msgId");
            assertEquals(j.path("offsetMsgId").asText(), ((MessageClientExt) m).getOffsetMsgId(), "offsetMsgId");
            assertEquals(j.path("queueId").asInt(), m.getQueueId(), "queueId");
            assertEquals(j.path("queueOffset").asLong(), m.getQueueOffset(), "queueOffset");
            assertEquals("TagB", m.getTags(), "tags");
            assertEquals("bk-" + n + " shared", m.getKeys(), "keys (RocketMQ's space-separated KEYS)");
            assertEquals("bolide", m.getUserProperty("origin"), "user property origin");
            assertEquals("from bolide " + n, str(m.getBody()), "body");
            assertEquals(0, m.getReconsumeTimes(), "reconsumeTimes");
            Collector.assertOffsetMsgId(m);
        }
    }

    @Test
    void offsetsCommittedByOneKindSeenByTheOther() throws Exception {
        String topic = topic("offsets", 2);
        String group = name("cg");
        DefaultMQProducer producer = producer(name("pg"));
        for (int i = 0; i < 6; i++) {
            producer.send(new Message(topic, "TagO", "first-" + i, utf8("first " + i)));
        }
        // Bolide's consumer takes the first six and commits.
        assertEquals(6, bolideConsume(topic, group, 6).size(), "bolide consume of the first six");

        // The Java consumer of the same group goes on from there.
        Map<String, SendResult> second = new HashMap<>();
        for (int i = 0; i < 3; i++) {
            SendResult sr = producer.send(new Message(topic, "TagO", "second-" + i, utf8("second " + i)));
            second.put(sr.getMsgId(), sr);
        }
        DefaultLitePullConsumer consumer = litePullConsumer(group);
        consumer.setAutoCommit(false);
        consumer.subscribe(topic, "*");
        consumer.start();
        Collector c = new Collector();
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (c.distinct() < second.size() && System.nanoTime() < deadline) {
            c.addAll(consumer.poll(500));
        }
        c.addAll(consumer.poll(1000));
        assertEquals(second.size(), c.distinct(), "the Java consumer gets exactly the three new ones");
        for (SendResult sr : second.values()) {
            Collector.assertMatches(sr, c.first(sr.getMsgId()));
        }
        consumer.commitSync();
        consumer.shutdown();

        // And Bolide's consumer goes on from the Java consumer's commit.
        List<String> third = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            third.add(producer.send(new Message(topic, "TagO", "third-" + i, utf8("third " + i))).getMsgId());
        }
        List<JsonNode> got = bolideConsume(topic, group, 0);
        List<String> ids = new ArrayList<>();
        got.forEach(j -> ids.add(j.path("msgId").asText()));
        ids.sort(null);
        third.sort(null);
        assertEquals(third, ids, "bolide consume after the Java consumer's commit");
    }
}
