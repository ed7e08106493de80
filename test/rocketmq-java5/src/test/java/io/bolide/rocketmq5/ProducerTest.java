package io.bolide.rocketmq5;

import static io.bolide.rocketmq5.BolideCluster.jsonField;
import static io.bolide.rocketmq5.BolideCluster.jsonNumber;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * RocketMQ 5's Java producer against Bolide: normal (over TLS, the client's default, and over
 * plaintext), FIFO, delay and transactional sends. Each send is checked on the server with Bolide's
 * own tools (bolide msg get, bolide consume), so these tests need the v5 producer side only.
 */
@Timeout(120)
class ProducerTest {

    private static BolideCluster cluster;

    @BeforeAll
    static void start() {
        cluster = BolideCluster.start("producer");
    }

    @AfterAll
    static void stop() {
        if (cluster != null) {
            cluster.close();
        }
    }

    private static Message message(String topic, String tag, String body, String... keys) {
        var b = V5.PROVIDER.newMessageBuilder().setTopic(topic).setTag(tag).setBody(body.getBytes(StandardCharsets.UTF_8));
        if (keys.length > 0) {
            b.setKeys(keys);
        }
        return b.build();
    }

    private static void sendNormal(boolean tls) throws Exception {
        String topic = V5.uniq("java-normal");
        cluster.createTopic(topic, 4, "NORMAL");
        try (Producer producer = V5.PROVIDER.newProducerBuilder()
                .setClientConfiguration(V5.config(cluster, tls)).setTopics(topic).build()) {
            List<String> ids = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                Message m = V5.PROVIDER.newMessageBuilder().setTopic(topic).setTag("TagA").setKeys("key-" + i)
                        .addProperty("color", "red").setBody(("normal " + i).getBytes(StandardCharsets.UTF_8)).build();
                SendReceipt r = producer.send(m);
                assertNotNull(r.getMessageId());
                ids.add(r.getMessageId().toString());
            }
            assertEquals(ids.size(), new HashSet<>(ids).size(), "message ids are unique");
            for (int i = 0; i < ids.size(); i++) {
                String id = ids.get(i);
                String json = V5.waitFor("message " + id + " in the store", Duration.ofSeconds(15), () -> cluster.getMessage(topic, id));
                assertEquals(id, jsonField(json, "msgId"));
                assertEquals(topic, jsonField(json, "topic"));
                assertEquals("TagA", jsonField(json, "tags"));
                assertTrue(json.contains("\"keys\":[\"key-" + i + "\"]"), json);
                assertEquals("red", jsonField(json, "color"));
                assertEquals("normal " + i, jsonField(json, "body"));
            }
            List<String> got = cluster.consume(topic, V5.uniq("java-normal-check"), ids.size());
            Set<String> gotIds = new HashSet<>();
            got.forEach(j -> gotIds.add(jsonField(j, "msgId")));
            assertEquals(new HashSet<>(ids), gotIds, "Bolide's consumer reads them with the same ids");
        }
    }

    @Test
    void sendNormalOverTls() throws Exception {
        V5.skipIfGap("send.normal.tls");
        sendNormal(true);
    }

    @Test
    void sendNormalOverPlaintext() throws Exception {
        V5.skipIfGap("send.normal.plaintext");
        sendNormal(false);
    }

    @Test
    void sendFifo() throws Exception {
        V5.skipIfGap("send.fifo");
        String topic = V5.uniq("java-fifo");
        cluster.createTopic(topic, 4, "FIFO");
        try (Producer producer = V5.PROVIDER.newProducerBuilder()
                .setClientConfiguration(V5.config(cluster)).setTopics(topic).build()) {
            Map<String, List<String>> sent = new LinkedHashMap<>();
            for (int i = 0; i < 8; i++) {
                for (String g : List.of("order-1", "order-2", "order-3")) {
                    Message m = V5.PROVIDER.newMessageBuilder().setTopic(topic).setTag("fifo").setMessageGroup(g)
                            .setBody((g + " " + i).getBytes(StandardCharsets.UTF_8)).build();
                    sent.computeIfAbsent(g, k -> new ArrayList<>()).add(producer.send(m).getMessageId().toString());
                }
            }
            for (var e : sent.entrySet()) {
                Set<String> queues = new HashSet<>();
                long prev = -1;
                int i = 0;
                for (String id : e.getValue()) {
                    String json = V5.waitFor("message " + id + " in the store", Duration.ofSeconds(15), () -> cluster.getMessage(topic, id));
                    queues.add(jsonField(json, "broker") + "/" + jsonNumber(json, "queueId"));
                    assertEquals(e.getKey(), jsonField(json, "shardingKey"), "the message group is the sharding key");
                    assertEquals(e.getKey() + " " + i++, jsonField(json, "body"));
                    long off = jsonNumber(json, "queueOffset");
                    assertTrue(off > prev, "group " + e.getKey() + ": offsets follow the send order");
                    prev = off;
                }
                assertEquals(1, queues.size(), "group " + e.getKey() + " uses one queue: " + queues);
            }
        }
    }

    @Test
    void sendDelay() throws Exception {
        V5.skipIfGap("send.delay");
        String topic = V5.uniq("java-delay");
        cluster.createTopic(topic, 4, "DELAY");
        try (Producer producer = V5.PROVIDER.newProducerBuilder()
                .setClientConfiguration(V5.config(cluster)).setTopics(topic).build()) {
            long deliverAt = System.currentTimeMillis() + 3000;
            Message m = V5.PROVIDER.newMessageBuilder().setTopic(topic).setTag("later").setDeliveryTimestamp(deliverAt)
                    .setBody("delayed".getBytes(StandardCharsets.UTF_8)).build();
            String id = producer.send(m).getMessageId().toString();
            // A new group starts at the first message: the delayed one is not in the topic before
            // its time, so when it arrives it was stored at or after the timestamp.
            List<String> got = cluster.consume(topic, V5.uniq("java-delay-check"), 1);
            assertEquals(1, got.size(), "the delayed message is delivered");
            assertEquals(id, jsonField(got.get(0), "msgId"));
            long stored = Instant.parse(jsonField(got.get(0), "storeTimestamp")).toEpochMilli();
            assertTrue(stored >= deliverAt - 5, "stored at " + stored + ", not before " + deliverAt);
        }
    }

    @Test
    void transactionCommit() throws Exception {
        V5.skipIfGap("transaction.commit");
        String topic = V5.uniq("java-txn");
        cluster.createTopic(topic, 4, "TRANSACTION");
        try (Producer producer = V5.PROVIDER.newProducerBuilder()
                .setClientConfiguration(V5.config(cluster)).setTopics(topic)
                .setTransactionChecker(mv -> TransactionResolution.COMMIT).build()) {
            Transaction tx = producer.beginTransaction();
            String id = producer.send(message(topic, "txn", "committed", "tx-commit"), tx).getMessageId().toString();
            tx.commit();
            List<String> got = cluster.consume(topic, V5.uniq("java-txn-check"), 1);
            assertEquals(1, got.size());
            assertEquals(id, jsonField(got.get(0), "msgId"));
            assertEquals("committed", jsonField(got.get(0), "body"));
        }
    }

    @Test
    void transactionCheckBack() throws Exception {
        V5.skipIfGap("transaction.checkback");
        String topic = V5.uniq("java-txn-check");
        cluster.createTopic(topic, 4, "TRANSACTION");
        List<String> checked = new CopyOnWriteArrayList<>();
        try (Producer producer = V5.PROVIDER.newProducerBuilder()
                .setClientConfiguration(V5.config(cluster)).setTopics(topic)
                .setTransactionChecker(mv -> {
                    checked.add(mv.getMessageId().toString());
                    return TransactionResolution.COMMIT;
                }).build()) {
            Transaction tx = producer.beginTransaction();
            String id = producer.send(message(topic, "txn", "checked"), tx).getMessageId().toString();
            // Neither commit nor rollback: the broker asks the producer on its Telemetry stream.
            V5.waitFor("a check-back of the half message", Duration.ofSeconds(60), () -> checked.contains(id));
            List<String> got = cluster.consume(topic, V5.uniq("java-txn-check"), 1);
            assertEquals(1, got.size());
            assertEquals(id, jsonField(got.get(0), "msgId"));
        }
    }
}
