package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.junit.jupiter.api.Test;

/** DefaultMQPushConsumer with a concurrent and with an orderly listener. */
class PushConsumerTest extends CompatTest {

    private static final Duration CONSUME_TIMEOUT = Duration.ofSeconds(40);

    @Test
    void concurrentListenerWithTagFilter() throws Exception {
        String topic = topic("concurrent", 4);
        DefaultMQProducer producer = producer(name("pg"));
        String[] tags = {"TagA", "TagB", "TagC"};
        List<SendResult> wanted = new ArrayList<>();
        List<String> unwanted = new ArrayList<>();
        for (int i = 0; i < 30; i++) {
            String tag = tags[i % 3];
            Message m = new Message(topic, tag, "key-" + i, utf8("body " + i));
            m.putUserProperty("tag", tag);
            SendResult sr = producer.send(m);
            if (tag.equals("TagC")) {
                unwanted.add(sr.getMsgId());
            } else {
                wanted.add(sr);
            }
        }

        Collector c = new Collector();
        AtomicInteger calls = new AtomicInteger();
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, "TagA || TagB");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            calls.incrementAndGet();
            c.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        c.awaitDistinct(wanted.size(), CONSUME_TIMEOUT);
        // Give a wrongly delivered TagC message time to show up.
        Thread.sleep(1000);
        for (SendResult sr : wanted) {
            MessageExt m = c.first(sr.getMsgId());
            Collector.assertMatches(sr, m);
            assertEquals(m.getUserProperty("tag"), m.getTags(), "tag");
            assertTrue(m.getTags().equals("TagA") || m.getTags().equals("TagB"), "tag " + m.getTags());
        }
        for (String id : unwanted) {
            assertEquals(List.of(), c.deliveries(id), "TagC message " + id + " is filtered out");
        }
        assertEquals(wanted.size(), c.distinct(), "distinct messages consumed");
        assertEquals(Map.of(), c.duplicates(), "consumed twice");
    }

    @Test
    void orderlyListenerKeepsQueueOrder() throws Exception {
        String topic = topic("orderly", 4);
        DefaultMQProducer producer = producer(name("pg"));
        int n = 80;
        List<SendResult> results = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            results.add(producer.send(new Message(topic, "TagA", "key-" + i, utf8("body " + i))));
        }

        Collector c = new Collector();
        Map<Integer, List<Long>> offsetsByQueue = new ConcurrentHashMap<>();
        Set<Integer> busy = ConcurrentHashMap.newKeySet();
        List<String> violations = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            int q = ctx.getMessageQueue().getQueueId();
            if (!busy.add(q)) {
                violations.add("queue " + q + " consumed by two threads at once");
            }
            try {
                for (MessageExt m : msgs) {
                    if (m.getQueueId() != q) {
                        violations.add("message of queue " + m.getQueueId() + " in a batch of queue " + q);
                    }
                    offsetsByQueue.computeIfAbsent(q, x -> new CopyOnWriteArrayList<>()).add(m.getQueueOffset());
                }
                c.addAll(msgs);
                Thread.sleep(2);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                busy.remove(q);
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();
        c.awaitDistinct(n, CONSUME_TIMEOUT);
        assertEquals(List.of(), violations, "orderly violations");
        assertEquals(4, offsetsByQueue.size(), "queues consumed: " + offsetsByQueue.keySet());
        for (Map.Entry<Integer, List<Long>> e : offsetsByQueue.entrySet()) {
            List<Long> got = e.getValue();
            for (int i = 0; i < got.size(); i++) {
                assertEquals((long) i, got.get(i), "queue " + e.getKey() + " offsets in consumption order: " + got);
            }
        }
        for (SendResult sr : results) {
            Collector.assertMatches(sr, c.first(sr.getMsgId()));
        }
        assertEquals(Map.of(), c.duplicates(), "consumed twice");
    }
}
