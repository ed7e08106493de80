package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;
import org.junit.jupiter.api.Test;

/**
 * Groups of more than one consumer: clustering members share the queues (each message once, the
 * queues split between them, taken over when a member leaves); broadcasting members each get all.
 */
class GroupTest extends CompatTest {

    private static final Duration TIMEOUT = Duration.ofSeconds(40);

    private DefaultMQPushConsumer member(String group, String topic, MessageModel model, Collector c) throws Exception {
        DefaultMQPushConsumer consumer = pushConsumer(group);
        consumer.setMessageModel(model);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        return consumer;
    }

    /** The queues of topic the consumer's rebalance currently holds. */
    private static Set<Integer> held(DefaultMQPushConsumer consumer, String topic) {
        return consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().entrySet().stream()
                .filter(e -> e.getKey().getTopic().equals(topic) && !e.getValue().isDropped())
                .map(e -> e.getKey().getQueueId()).collect(Collectors.toCollection(java.util.TreeSet::new));
    }

    private static List<SendResult> send(DefaultMQProducer producer, String topic, String prefix, int n) throws Exception {
        List<SendResult> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(producer.send(new Message(topic, "TagG", prefix + i, utf8(prefix + " " + i))));
        }
        return out;
    }

    @Test
    void clusteringMembersShareQueues() throws Exception {
        String topic = topic("clustering", 4);
        String group = name("cg");
        Collector a = new Collector();
        Collector b = new Collector();
        DefaultMQPushConsumer ca = member(group, topic, MessageModel.CLUSTERING, a);
        DefaultMQPushConsumer cb = member(group, topic, MessageModel.CLUSTERING, b);

        // Both members learn of each other (NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_LIST_BY_GROUP)
        // and split the 4 queues between them, with no queue held twice.
        await(TIMEOUT, () -> {
            Set<Integer> ha = held(ca, topic);
            Set<Integer> hb = held(cb, topic);
            Set<Integer> all = new HashSet<>(ha);
            all.addAll(hb);
            return ha.size() == 2 && hb.size() == 2 && all.size() == 4;
        }, () -> "queues held: a " + held(ca, topic) + ", b " + held(cb, topic));

        DefaultMQProducer producer = producer(name("pg"));
        List<SendResult> sent = send(producer, topic, "before-", 40);
        await(TIMEOUT, () -> a.distinct() + b.distinct() >= sent.size(),
                () -> "consumed " + a.distinct() + " + " + b.distinct() + " of " + sent.size());
        Thread.sleep(500);
        assertEquals(sent.size(), a.distinct() + b.distinct(), "each message consumed by one member");
        for (SendResult sr : sent) {
            boolean inA = a.first(sr.getMsgId()) != null;
            boolean inB = b.first(sr.getMsgId()) != null;
            assertTrue(inA ^ inB, "message " + sr.getMsgId() + " consumed by " + (inA && inB ? "both members" : "neither"));
            Collector.assertMatches(sr, inA ? a.first(sr.getMsgId()) : b.first(sr.getMsgId()));
            Set<Integer> owner = inA ? held(ca, topic) : held(cb, topic);
            assertTrue(owner.contains(sr.getMessageQueue().getQueueId()),
                    "message of queue " + sr.getMessageQueue().getQueueId() + " consumed by the member holding " + owner);
        }

        // b leaves (persisting its offsets and unregistering): a takes every queue over and goes on
        // from b's offsets, so nothing is consumed twice.
        cb.shutdown();
        await(TIMEOUT, () -> held(ca, topic).size() == 4, () -> "queues held by a after b left: " + held(ca, topic));
        List<SendResult> after = send(producer, topic, "after-", 20);
        await(TIMEOUT, () -> after.stream().allMatch(sr -> a.first(sr.getMsgId()) != null),
                () -> "messages sent after b left consumed by a: "
                        + after.stream().filter(sr -> a.first(sr.getMsgId()) != null).count() + " of " + after.size());
        Thread.sleep(500);
        assertEquals(Map.of(), a.duplicates(), "consumed twice by a");
        assertEquals(Map.of(), b.duplicates(), "consumed twice by b");
        for (SendResult sr : sent) {
            assertFalse(a.first(sr.getMsgId()) != null && b.first(sr.getMsgId()) != null,
                    "message " + sr.getMsgId() + " consumed by both members");
        }
    }

    @Test
    void broadcastingMembersEachGetAll() throws Exception {
        String topic = topic("broadcast", 4);
        String group = name("cg");
        Collector a = new Collector();
        Collector b = new Collector();
        DefaultMQPushConsumer ca = member(group, topic, MessageModel.BROADCASTING, a);
        DefaultMQPushConsumer cb = member(group, topic, MessageModel.BROADCASTING, b);
        await(TIMEOUT, () -> held(ca, topic).size() == 4 && held(cb, topic).size() == 4,
                () -> "queues held: a " + held(ca, topic) + ", b " + held(cb, topic));

        DefaultMQProducer producer = producer(name("pg"));
        List<SendResult> sent = send(producer, topic, "bc-", 20);
        a.awaitDistinct(sent.size(), TIMEOUT);
        b.awaitDistinct(sent.size(), TIMEOUT);
        for (SendResult sr : sent) {
            Collector.assertMatches(sr, a.first(sr.getMsgId()));
            Collector.assertMatches(sr, b.first(sr.getMsgId()));
        }
        assertEquals(Map.of(), a.duplicates(), "consumed twice by a");
        assertEquals(Map.of(), b.duplicates(), "consumed twice by b");
    }
}
