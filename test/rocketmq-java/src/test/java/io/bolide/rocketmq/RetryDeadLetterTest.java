package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.junit.jupiter.api.Test;

/**
 * A concurrent listener that always answers RECONSUME_LATER: the message comes back with
 * reconsumeTimes 0, 1, 2 (setMaxReconsumeTimes(2)), then lands in %DLQ%<group>, where a lite pull
 * consumer reads it with its keys, tags, properties and unique id intact.
 */
class RetryDeadLetterTest extends CompatTest {

    @Test
    void retriesThenDeadLetter() throws Exception {
        String topic = topic("retry", 2);
        String group = name("cg");
        int n = 2;

        Map<String, List<Integer>> reconsumeTimes = new ConcurrentHashMap<>();
        Map<String, List<String>> topicsSeen = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = pushConsumer(group);
        consumer.setMaxReconsumeTimes(2);
        // The retry topic %RETRY%<group> is made when the group first appears; an application would
        // see its route at the next 30 s poll of the NameServer. Polling every second keeps the test short.
        consumer.setPollNameServerInterval(1000);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                reconsumeTimes.computeIfAbsent(m.getMsgId(), k -> new CopyOnWriteArrayList<>()).add(m.getReconsumeTimes());
                topicsSeen.computeIfAbsent(m.getMsgId(), k -> new CopyOnWriteArrayList<>()).add(m.getTopic());
            }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        consumer.start();

        DefaultMQProducer producer = producer(name("pg"));
        List<SendResult> sent = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Message m = new Message(topic, "TagR", "retry-key-" + i, utf8("retry body " + i));
            m.putUserProperty("app-prop", "v" + i);
            sent.add(producer.send(m));
        }

        // Default levels for retries are 3 + reconsumeTimes: seconds with the test broker's levels.
        Duration timeout = Duration.ofSeconds(60);
        await(timeout, () -> sent.stream().allMatch(sr -> reconsumeTimes.getOrDefault(sr.getMsgId(), List.of()).size() >= 3),
                () -> "reconsumeTimes seen: " + reconsumeTimes);
        for (SendResult sr : sent) {
            List<Integer> got = new ArrayList<>(reconsumeTimes.get(sr.getMsgId()));
            got.sort(null);
            assertEquals(List.of(0, 1, 2), got.subList(0, 3), "reconsumeTimes of " + sr.getMsgId() + ": " + got);
            for (String t : topicsSeen.get(sr.getMsgId())) {
                assertEquals(topic, t, "a retried message shows its original topic");
            }
        }

        String dlq = MixAll.getDLQTopic(group);
        Collector dead = readDeadLetters(group, n, producer);
        for (int i = 0; i < n; i++) {
            SendResult sr = sent.get(i);
            MessageExt m = dead.first(sr.getMsgId());
            assertNotNull(m, "message " + sr.getMsgId() + " in " + dlq);
            assertEquals(dlq, m.getTopic(), "topic of a dead letter");
            assertEquals("retry-key-" + i, m.getKeys(), "keys");
            assertEquals("TagR", m.getTags(), "tags");
            assertEquals("v" + i, m.getUserProperty("app-prop"), "user property");
            assertEquals("retry body " + i, str(m.getBody()), "body");
            assertEquals(topic, m.getProperty("RETRY_TOPIC"), "RETRY_TOPIC names the original topic");
            assertEquals(3, m.getReconsumeTimes(), "reconsumeTimes of a dead letter after 2 retries (RocketMQ: times + 1)");
            Collector.assertOffsetMsgId(m);
        }
        // No further deliveries after the dead letter.
        Thread.sleep(1500);
        for (SendResult sr : sent) {
            assertFalse(reconsumeTimes.get(sr.getMsgId()).size() > 3,
                    "deliveries after the last retry: " + reconsumeTimes.get(sr.getMsgId()));
        }
    }

    /**
     * Reads n messages from %DLQ%<group> as an application would, with a lite pull consumer of a
     * group of its own (a new group starts at the first offset: CONSUME_FROM_FIRST_OFFSET).
     */
    private Collector readDeadLetters(String group, int n, DefaultMQProducer admin) throws Exception {
        Duration timeout = Duration.ofSeconds(60);
        String dlq = MixAll.getDLQTopic(group);
        DefaultLitePullConsumer reader = litePullConsumer(name("dlq-reader"));
        reader.setPollNameServerInterval(1000);
        reader.start();
        Collection<MessageQueue> mqs = awaitQueues(reader, dlq, timeout);
        // No seek right after assign: it cancels the pull task assign started, and the client may
        // close its connection over the interrupted call.
        reader.assign(mqs);
        Collector dead = new Collector();
        long deadline = System.nanoTime() + timeout.toNanos();
        while (dead.distinct() < n && System.nanoTime() < deadline) {
            dead.addAll(reader.poll(1000));
        }
        if (dead.distinct() < n) {
            StringBuilder why = new StringBuilder();
            for (MessageQueue mq : mqs) {
                why.append(mq).append(": min ").append(admin.minOffset(mq)).append(" max ").append(admin.maxOffset(mq))
                        .append(", committed ").append(reader.committed(mq)).append("; ");
            }
            assertEquals(n, dead.distinct(), "messages polled from " + dlq + " (" + why + ")");
        }
        return dead;
    }

    @Test
    void orderlyRetriesInPlaceThenDeadLetter() throws Exception {
        String topic = topic("orderly-retry", 1);
        String group = name("cg");
        List<String> seen = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer consumer = pushConsumer(group);
        consumer.setMaxReconsumeTimes(2);
        consumer.setSuspendCurrentQueueTimeMillis(300);
        consumer.setPollNameServerInterval(1000);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                seen.add(m.getKeys() + ":" + m.getReconsumeTimes());
                if (m.getKeys().equals("poison")) {
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();

        DefaultMQProducer producer = producer(name("pg"));
        Message poison = new Message(topic, "TagP", "poison", utf8("poison body"));
        poison.putUserProperty("app-prop", "p");
        SendResult sr = producer.send(poison);
        producer.send(new Message(topic, "TagP", "after-1", utf8("after 1")));
        producer.send(new Message(topic, "TagP", "after-2", utf8("after 2")));

        // An orderly listener's failures are retried in place (the client counts), the queue waits,
        // and after the last retry the client sends the message to %RETRY%<group> with
        // RECONSUME_TIME above MAX_RECONSUME_TIMES: the broker puts it in %DLQ%<group>.
        await(Duration.ofSeconds(30), () -> seen.contains("after-2:0"), () -> "consumed: " + seen);
        assertEquals(List.of("poison:0", "poison:1", "poison:2", "after-1:0", "after-2:0"), seen,
                "consumption order: the queue waits for its first message");
        Collector dead = readDeadLetters(group, 1, producer);
        MessageExt m = dead.first(sr.getMsgId());
        assertNotNull(m, "the poison message " + sr.getMsgId() + " in %DLQ%" + group);
        assertEquals(MixAll.getDLQTopic(group), m.getTopic(), "topic");
        assertEquals("poison", m.getKeys(), "keys");
        assertEquals("TagP", m.getTags(), "tags");
        assertEquals("p", m.getUserProperty("app-prop"), "user property");
        assertEquals("poison body", str(m.getBody()), "body");
        assertEquals(topic, m.getProperty("RETRY_TOPIC"), "RETRY_TOPIC names the original topic");
        assertEquals(3, m.getReconsumeTimes(), "reconsumeTimes of the dead letter (the client's count + 1)");
        Thread.sleep(1000);
        assertEquals(5, seen.size(), "nothing redelivered after the dead letter: " + seen);
    }

    private static Collection<MessageQueue> awaitQueues(DefaultLitePullConsumer c, String topic, Duration timeout) {
        List<Collection<MessageQueue>> found = new ArrayList<>();
        List<String> errors = new ArrayList<>();
        await(timeout, () -> {
            try {
                Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
                if (mqs != null && !mqs.isEmpty()) {
                    found.add(mqs);
                    return true;
                }
            } catch (Exception e) {
                errors.add(e.toString());
            }
            return false;
        }, () -> "no route for " + topic + ": " + (errors.isEmpty() ? "" : errors.get(errors.size() - 1)));
        return found.get(0);
    }
}
