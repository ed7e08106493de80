package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.junit.jupiter.api.Test;

/** DefaultLitePullConsumer: subscribe + poll with committed offsets, and assign + seek. */
class LitePullTest extends CompatTest {

    private static final Duration TIMEOUT = Duration.ofSeconds(40);

    /** Polls until n distinct messages are in c or the timeout passes. */
    private static void pollInto(DefaultLitePullConsumer consumer, Collector c, int n, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (c.distinct() < n && System.nanoTime() < deadline) {
            c.addAll(consumer.poll(500));
        }
    }

    @Test
    void subscribeAndPollCommitsOffsets() throws Exception {
        String topic = topic("subscribe", 4);
        String group = name("cg");
        DefaultMQProducer producer = producer(name("pg"));
        List<SendResult> first = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            Message m = new Message(topic, "TagL", "key-" + i, utf8("body " + i));
            m.putUserProperty("seq", String.valueOf(i));
            first.add(producer.send(m));
        }

        DefaultLitePullConsumer consumer = litePullConsumer(group);
        consumer.subscribe(topic, "*");
        consumer.start();
        Collector c = new Collector();
        pollInto(consumer, c, first.size(), TIMEOUT);
        assertEquals(first.size(), c.distinct(), "messages polled");
        for (int i = 0; i < first.size(); i++) {
            MessageExt m = c.first(first.get(i).getMsgId());
            Collector.assertMatches(first.get(i), m);
            assertEquals("key-" + i, m.getKeys(), "keys");
            assertEquals("TagL", m.getTags(), "tags");
            assertEquals(String.valueOf(i), m.getUserProperty("seq"), "user property");
        }
        assertEquals(Map.of(), c.duplicates(), "polled twice");
        // Auto-commit commits every 5 s; commit what was polled now, as an application may.
        consumer.commitSync();
        consumer.shutdown();

        // A new member of the group goes on from the committed offsets: only the new messages.
        List<SendResult> second = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            second.add(producer.send(new Message(topic, "TagL", "later-" + i, utf8("later " + i))));
        }
        DefaultLitePullConsumer again = litePullConsumer(group);
        again.subscribe(topic, "*");
        again.start();
        Collector c2 = new Collector();
        pollInto(again, c2, second.size(), TIMEOUT);
        // Anything old would show up with the new ones; poll once more to give it the chance.
        c2.addAll(again.poll(1000));
        for (SendResult sr : second) {
            Collector.assertMatches(sr, c2.first(sr.getMsgId()));
        }
        for (SendResult sr : first) {
            assertEquals(List.of(), c2.deliveries(sr.getMsgId()), "already committed message polled again");
        }
        assertEquals(second.size(), c2.distinct(), "messages polled by the second consumer");
    }

    @Test
    void assignAndSeek() throws Exception {
        String topic = topic("assign", 2);
        DefaultMQProducer producer = producer(name("pg"));
        String group = name("cg");
        DefaultLitePullConsumer consumer = litePullConsumer(group);
        consumer.setAutoCommit(false);
        consumer.start();
        Collection<MessageQueue> mqs = consumer.fetchMessageQueues(topic);
        assertEquals(2, mqs.size(), "queues of " + topic + ": " + mqs);
        MessageQueue q0 = mqs.stream().filter(q -> q.getQueueId() == 0).findFirst().orElseThrow();

        List<SendResult> sent = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            SendResult sr = producer.send(new Message(topic, "TagS", "key-" + i, utf8("body " + i)), q0);
            assertEquals(i, sr.getQueueOffset(), "queue offset of message " + i + " sent to queue 0");
            sent.add(sr);
        }

        consumer.assign(List.of(q0));
        // The assignment starts pulling at once, from the new group's first offset. Let those pulls land
        // before seeking: the client may hand out a pull that was in flight when seek was called (a race
        // inside DefaultLitePullConsumer), which would show offsets before the seek.
        for (int i = 0; i < 10 && !consumer.poll(1000).isEmpty(); i++) {
            // drained
        }

        List<Long> offsets = seekAndPoll(consumer, q0, 6, 4);
        assertEquals(List.of(6L, 7L, 8L, 9L), offsets, "offsets after seek(6)");

        offsets = seekAndPoll(consumer, q0, 2, 8);
        assertEquals(List.of(2L, 3L, 4L, 5L, 6L, 7L, 8L, 9L), offsets, "offsets after seek(2)");

        offsets = seekAndPoll(consumer, q0, -1, 10);
        assertEquals(0L, offsets.get(0), "first offset after seekToBegin");
        assertEquals(10, offsets.size(), "messages after seekToBegin");

        consumer.seekToEnd(q0);
        List<MessageExt> none = consumer.poll(1000);
        assertTrue(none.isEmpty(), "nothing after seekToEnd, got offsets " + none.stream().map(MessageExt::getQueueOffset).toList());
        SendResult last = producer.send(new Message(topic, "TagS", "key-last", utf8("last")), q0);
        List<Long> after = pollOffsets(consumer, 1);
        assertEquals(List.of(10L), after, "the message sent after seekToEnd");

        // What the consumer saw matches what the producer was told.
        Collector c = new Collector();
        for (int attempt = 0; attempt < 3 && c.distinct() < 11; attempt++) {
            consumer.seek(q0, 0);
            pollInto(consumer, c, 11, Duration.ofSeconds(8));
        }
        for (SendResult sr : sent) {
            Collector.assertMatches(sr, c.first(sr.getMsgId()));
        }
        Collector.assertMatches(last, c.first(last.getMsgId()));

        // A committed offset is stored by the broker: another member of the group reads it back and
        // polls from there.
        consumer.commit(Map.of(q0, 7L), true);
        DefaultLitePullConsumer other = litePullConsumer(group);
        other.setAutoCommit(false);
        other.start();
        other.assign(List.of(q0));
        await(Duration.ofSeconds(10), () -> {
            try {
                return other.committed(q0) == 7L;
            } catch (Exception e) {
                return false;
            }
        }, () -> "committed offset of queue 0 as another member reads it: " + committedOrError(other, q0));
        assertEquals(List.of(7L, 8L, 9L, 10L), pollOffsets(other, 4), "offsets polled from the committed offset");
    }

    private static String committedOrError(DefaultLitePullConsumer c, MessageQueue mq) {
        try {
            return String.valueOf(c.committed(mq));
        } catch (Exception e) {
            return e.toString();
        }
    }

    @Test
    void assignWithoutSeekStartsAtTheFirstOffset() throws Exception {
        // A new group has no committed offset: the broker says so (QUERY_NOT_FOUND, or 0 while the
        // queue still starts at 0) and CONSUME_FROM_FIRST_OFFSET starts at the queue's beginning.
        String topic = topic("fresh", 1);
        DefaultMQProducer producer = producer(name("pg"));
        MessageQueue q0 = new MessageQueue(topic, "broker-a", 0);
        for (int i = 0; i < 5; i++) {
            producer.send(new Message(topic, "TagF", "key-" + i, utf8("body " + i)), q0);
        }
        DefaultLitePullConsumer consumer = litePullConsumer(name("cg"));
        consumer.setAutoCommit(false);
        consumer.start();
        consumer.assign(List.of(q0));
        assertEquals(List.of(0L, 1L, 2L, 3L, 4L), pollOffsets(consumer, 5), "offsets polled by a new group without seek");
    }

    /**
     * Seeks (offset -1: seekToBegin) and polls n messages, returning their queue offsets. A seek
     * interrupts the client's pull in flight; when that interrupt lands before the request is sent,
     * the client closes its connection, the first pull after the seek fails, and the retried pull
     * goes on from the old position: the seek is lost (a client bug, whatever the broker). So when
     * nothing at all comes within 8 s, seek again (at most 3 times).
     */
    private static List<Long> seekAndPoll(DefaultLitePullConsumer consumer, MessageQueue mq, long offset, int n) throws Exception {
        List<Long> offsets = new ArrayList<>();
        for (int attempt = 0; attempt < 3 && offsets.isEmpty(); attempt++) {
            if (offset < 0) {
                consumer.seekToBegin(mq);
            } else {
                consumer.seek(mq, offset);
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(8).toNanos();
            while (offsets.size() < n && System.nanoTime() < deadline) {
                for (MessageExt m : consumer.poll(500)) {
                    offsets.add(m.getQueueOffset());
                }
            }
        }
        return offsets;
    }

    /** Polls until n messages came (or the timeout), returning their queue offsets in order. */
    private static List<Long> pollOffsets(DefaultLitePullConsumer consumer, int n) {
        List<Long> offsets = new ArrayList<>();
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (offsets.size() < n && System.nanoTime() < deadline) {
            for (MessageExt m : consumer.poll(500)) {
                offsets.add(m.getQueueOffset());
            }
        }
        return offsets;
    }
}
