package io.bolide.rocketmq5;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * RocketMQ 5's Java SimpleConsumer and PushConsumer against Bolide, over TLS (the client's
 * default): receive and ack, a change of invisible duration, push consumption, and a failed
 * consumption redelivered with the next delivery attempt. Acknowledgements are checked on the
 * server (the group's lag), since the simple consumer cannot tell a lost ack from a good one.
 */
@Timeout(180)
class ConsumerTest {

    private static BolideCluster cluster;
    private static Producer producer;

    @BeforeAll
    static void start() throws Exception {
        cluster = BolideCluster.start("consumer");
    }

    @AfterAll
    static void stop() throws Exception {
        if (producer != null) {
            producer.close();
        }
        if (cluster != null) {
            cluster.close();
        }
    }

    private static synchronized Producer producer(String topic) throws Exception {
        if (producer == null) {
            producer = V5.PROVIDER.newProducerBuilder().setClientConfiguration(V5.config(cluster)).setTopics(topic).build();
        }
        return producer;
    }

    private static List<String> send(String topic, int n, String tag) throws Exception {
        Producer p = producer(topic);
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            var m = V5.PROVIDER.newMessageBuilder().setTopic(topic).setTag(tag).setKeys("key-" + i)
                    .addProperty("i", String.valueOf(i)).setBody((tag + " " + i).getBytes(StandardCharsets.UTF_8)).build();
            ids.add(p.send(m).getMessageId().toString());
        }
        return ids;
    }

    private static SimpleConsumer simpleConsumer(String group, String topic) throws Exception {
        return V5.PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(V5.config(cluster))
                .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(5))
                .setSubscriptionExpressions(Map.of(topic, new FilterExpression("*", FilterExpressionType.TAG)))
                .build();
    }

    private static String body(MessageView v) {
        return StandardCharsets.UTF_8.decode(v.getBody().duplicate()).toString();
    }

    @Test
    void simpleReceiveAndAck() throws Exception {
        V5.skipIfGap("simple.receive.ack");
        String topic = V5.uniq("java-simple");
        String group = V5.uniq("java-simple-g");
        cluster.createTopic(topic, 4, "NORMAL");
        try (SimpleConsumer consumer = simpleConsumer(group, topic)) {
            List<String> ids = send(topic, 10, "TagA");
            Set<String> seen = new HashSet<>();
            V5.waitFor("every message", Duration.ofSeconds(60), () -> {
                for (MessageView v : consumer.receive(16, Duration.ofSeconds(30))) {
                    int i = Integer.parseInt(v.getProperties().get("i"));
                    assertEquals(topic, v.getTopic());
                    assertEquals("TagA", v.getTag().orElse(null));
                    assertEquals(List.of("key-" + i), new ArrayList<>(v.getKeys()));
                    assertEquals("TagA " + i, body(v));
                    assertEquals(1, v.getDeliveryAttempt(), "first delivery");
                    seen.add(v.getMessageId().toString());
                    consumer.ack(v);
                }
                return seen.size() >= ids.size();
            });
            assertEquals(new HashSet<>(ids), seen);
            V5.lagIsZero(cluster, group, topic);
        }
    }

    @Test
    void simpleChangeInvisibleDuration() throws Exception {
        V5.skipIfGap("simple.change.invisible");
        String topic = V5.uniq("java-invis");
        String group = V5.uniq("java-invis-g");
        cluster.createTopic(topic, 4, "NORMAL");
        try (SimpleConsumer consumer = simpleConsumer(group, topic)) {
            String id = send(topic, 1, "x").get(0);
            MessageView first = V5.waitFor("the message", Duration.ofSeconds(60), () -> {
                List<MessageView> got = consumer.receive(1, Duration.ofSeconds(60));
                return got.isEmpty() ? null : got.get(0);
            });
            assertEquals(id, first.getMessageId().toString());
            assertEquals(1, first.getDeliveryAttempt());
            // From 60 s to 1 s: the message comes back soon, as the next delivery attempt.
            consumer.changeInvisibleDuration(first, Duration.ofSeconds(1));
            MessageView again = V5.waitFor("the message again", Duration.ofSeconds(60), () -> {
                for (MessageView v : consumer.receive(1, Duration.ofSeconds(30))) {
                    if (v.getMessageId().toString().equals(id)) {
                        return v;
                    }
                }
                return null;
            });
            assertEquals(2, again.getDeliveryAttempt(), "redelivered as attempt 2");
            consumer.ack(again);
            V5.lagIsZero(cluster, group, topic);
        }
    }

    @Test
    void simpleTagFilter() throws Exception {
        V5.skipIfGap("simple.tag.filter");
        String topic = V5.uniq("java-tag");
        String group = V5.uniq("java-tag-g");
        cluster.createTopic(topic, 4, "NORMAL");
        try (SimpleConsumer consumer = V5.PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(V5.config(cluster))
                .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(5))
                .setSubscriptionExpressions(Map.of(topic, new FilterExpression("TagA || TagC", FilterExpressionType.TAG)))
                .build()) {
            Set<String> wanted = new HashSet<>();
            wanted.addAll(send(topic, 2, "TagA"));
            send(topic, 2, "TagB");
            wanted.addAll(send(topic, 2, "TagC"));
            // A last TagA message after the others: once it is in, everything before it has been seen.
            String last = send(topic, 1, "TagA").get(0);
            wanted.add(last);
            Set<String> seen = new HashSet<>();
            V5.waitFor("the last message", Duration.ofSeconds(60), () -> {
                for (MessageView v : consumer.receive(16, Duration.ofSeconds(30))) {
                    assertFalse("TagB".equals(v.getTag().orElse(null)), "no TagB message");
                    seen.add(v.getMessageId().toString());
                    consumer.ack(v);
                }
                return seen.contains(last);
            });
            assertEquals(wanted, seen);
        }
    }

    @Test
    void simpleFifoGroupInOrder() throws Exception {
        V5.skipIfGap("simple.fifo");
        String topic = V5.uniq("java-sfifo");
        String group = V5.uniq("java-sfifo-g");
        cluster.createTopic(topic, 2, "FIFO");
        org.junit.jupiter.api.Assumptions.assumeTrue(cluster.createFifoGroup(group),
                "server lacks: bolide group create --fifo");
        try (SimpleConsumer consumer = simpleConsumer(group, topic)) {
            Producer p = producer(topic);
            List<String> groups = List.of("g1", "g2", "g3");
            int total = 0;
            for (int i = 0; i < 6; i++) {
                for (String g : groups) {
                    p.send(V5.PROVIDER.newMessageBuilder().setTopic(topic).setTag("f").setMessageGroup(g)
                            .setBody((g + " " + i).getBytes(StandardCharsets.UTF_8)).build());
                    total++;
                }
            }
            Map<String, List<Integer>> seen = new ConcurrentHashMap<>();
            Set<String> ids = new HashSet<>();
            int want = total;
            V5.waitFor("every FIFO message", Duration.ofSeconds(120), () -> {
                for (MessageView v : consumer.receive(4, Duration.ofSeconds(30))) {
                    String[] parts = body(v).split(" ");
                    seen.computeIfAbsent(parts[0], k -> new CopyOnWriteArrayList<>()).add(Integer.parseInt(parts[1]));
                    assertEquals(parts[0], v.getMessageGroup().orElse(null));
                    ids.add(v.getMessageId().toString());
                    consumer.ack(v);
                }
                return ids.size() >= want;
            });
            for (String g : groups) {
                assertEquals(List.of(0, 1, 2, 3, 4, 5), seen.get(g), "group " + g + " in send order, each once");
            }
            V5.lagIsZero(cluster, group, topic);
        }
    }

    @Test
    void simpleDeadLetterAfterMaxAttempts() throws Exception {
        V5.skipIfGap("simple.dead.letter");
        String topic = V5.uniq("java-dlq");
        String group = V5.uniq("java-dlq-g");
        cluster.createTopic(topic, 4, "NORMAL");
        org.junit.jupiter.api.Assumptions.assumeTrue(cluster.createGroupWithMaxAttempts(group, 2),
                "server lacks: bolide group create --max-delivery-attempts");
        try (SimpleConsumer consumer = simpleConsumer(group, topic)) {
            String id = send(topic, 1, "dlq").get(0);
            List<Integer> attempts = new CopyOnWriteArrayList<>();
            // Two deliveries, each given back at once (invisible for 1 s).
            V5.waitFor("two deliveries", Duration.ofSeconds(60), () -> {
                for (MessageView v : consumer.receive(1, Duration.ofSeconds(30))) {
                    attempts.add(v.getDeliveryAttempt());
                    consumer.changeInvisibleDuration(v, Duration.ofSeconds(1));
                }
                return attempts.size() >= 2;
            });
            assertEquals(List.of(1, 2), attempts);
            // The next delivery would be the third: the message goes to %DLQ%<group> instead.
            String dlq = V5.waitFor("the message in %DLQ%" + group, Duration.ofSeconds(90), () -> {
                for (MessageView v : consumer.receive(1, Duration.ofSeconds(30))) {
                    attempts.add(v.getDeliveryAttempt());
                    consumer.ack(v);
                }
                return cluster.getMessage("%DLQ%" + group, id);
            });
            assertEquals(List.of(1, 2), attempts, "no third delivery");
            assertEquals("dlq 0", BolideCluster.jsonField(dlq, "body"));
        }
    }

    private static PushConsumer pushConsumer(String group, String topic,
            org.apache.rocketmq.client.apis.consumer.MessageListener listener) throws Exception {
        return V5.PROVIDER.newPushConsumerBuilder().setClientConfiguration(V5.config(cluster))
                .setConsumerGroup(group)
                .setSubscriptionExpressions(Map.of(topic, new FilterExpression("*", FilterExpressionType.TAG)))
                .setMessageListener(listener).build();
    }

    @Test
    void pushConsumerSuccess() throws Exception {
        V5.skipIfGap("push.success");
        String topic = V5.uniq("java-push");
        String group = V5.uniq("java-push-g");
        cluster.createTopic(topic, 4, "NORMAL");
        Map<String, MessageView> got = new ConcurrentHashMap<>();
        try (PushConsumer consumer = pushConsumer(group, topic, v -> {
            got.put(v.getMessageId().toString(), v);
            return ConsumeResult.SUCCESS;
        })) {
            List<String> ids = send(topic, 20, "push");
            V5.waitFor("every message consumed", Duration.ofSeconds(90), () -> got.keySet().containsAll(ids));
            for (int i = 0; i < ids.size(); i++) {
                MessageView v = got.get(ids.get(i));
                assertNotNull(v);
                assertEquals("push " + i, body(v));
                assertEquals(1, v.getDeliveryAttempt());
            }
            V5.lagIsZero(cluster, group, topic);
        }
    }

    @Test
    void pushConsumerFailureIsRedelivered() throws Exception {
        V5.skipIfGap("push.redelivery");
        String topic = V5.uniq("java-retry");
        String group = V5.uniq("java-retry-g");
        cluster.createTopic(topic, 4, "NORMAL");
        Map<String, List<Integer>> attempts = new ConcurrentHashMap<>();
        try (PushConsumer consumer = pushConsumer(group, topic, v -> {
            attempts.computeIfAbsent(v.getMessageId().toString(), k -> new CopyOnWriteArrayList<>()).add(v.getDeliveryAttempt());
            // Fail the first two deliveries, succeed on the third.
            return v.getDeliveryAttempt() >= 3 ? ConsumeResult.SUCCESS : ConsumeResult.FAILURE;
        })) {
            List<String> ids = send(topic, 3, "retry");
            // The group's default backoff is 1 s, then 5 s.
            V5.waitFor("three deliveries of every message", Duration.ofSeconds(120),
                    () -> ids.stream().allMatch(id -> attempts.getOrDefault(id, List.of()).contains(3)));
            for (String id : ids) {
                assertEquals(List.of(1, 2, 3), attempts.get(id), "message " + id + ": delivery attempts");
            }
            assertFalse(attempts.isEmpty());
            V5.lagIsZero(cluster, group, topic);
        }
    }
}
