package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.junit.jupiter.api.Test;

/**
 * DefaultMQPullConsumer (deprecated in 5.x, still in many applications): what a PullResult exposes
 * (status, next/min/max offsets, the messages), tag filtering, a held pull, and offsets kept by the
 * broker.
 */
@SuppressWarnings("deprecation")
class PullConsumerTest extends CompatTest {

    @Test
    void pullResultsAndOffsets() throws Exception {
        String topic = topic("pull", 1);
        DefaultMQProducer producer = producer(name("pg"));
        MessageQueue q0 = new MessageQueue(topic, "broker-a", 0);
        List<SendResult> sent = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            sent.add(producer.send(new Message(topic, i % 2 == 0 ? "TagA" : "TagB", "key-" + i, utf8("body " + i)), q0));
        }

        String group = name("cg");
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(group);
        consumer.setNamesrvAddr(cluster.namesrvAddr());
        consumer.setInstanceName(group);
        consumer.start();
        try {
            PullResult all = consumer.pull(q0, "*", 0, 32);
            assertEquals(PullStatus.FOUND, all.getPullStatus(), "pull from 0");
            assertEquals(5, all.getMsgFoundList().size(), "messages from 0");
            assertEquals(5, all.getNextBeginOffset(), "nextBeginOffset");
            assertEquals(0, all.getMinOffset(), "minOffset");
            assertEquals(5, all.getMaxOffset(), "maxOffset");
            for (int i = 0; i < 5; i++) {
                MessageExt m = all.getMsgFoundList().get(i);
                Collector.assertMatches(sent.get(i), m);
                assertEquals("key-" + i, m.getKeys(), "keys");
            }

            PullResult some = consumer.pull(q0, "*", 3, 1);
            assertEquals(PullStatus.FOUND, some.getPullStatus(), "pull 1 from 3");
            assertEquals(1, some.getMsgFoundList().size(), "maxNums 1");
            assertEquals(3, some.getMsgFoundList().get(0).getQueueOffset(), "the message at offset 3");
            assertEquals(4, some.getNextBeginOffset(), "nextBeginOffset after one");

            PullResult tagged = consumer.pull(q0, "TagB", 0, 32);
            assertEquals(PullStatus.FOUND, tagged.getPullStatus(), "pull TagB");
            List<Long> offsets = new ArrayList<>();
            tagged.getMsgFoundList().forEach(m -> offsets.add(m.getQueueOffset()));
            assertEquals(List.of(1L, 3L), offsets, "TagB messages");
            assertEquals(5, tagged.getNextBeginOffset(), "nextBeginOffset past the filtered ones");

            PullResult none = consumer.pull(q0, "*", 5, 32);
            assertEquals(PullStatus.NO_NEW_MSG, none.getPullStatus(), "pull at the end");
            assertEquals(5, none.getNextBeginOffset(), "nextBeginOffset at the end");

            PullResult beyond = consumer.pull(q0, "*", 100, 32);
            assertEquals(PullStatus.OFFSET_ILLEGAL, beyond.getPullStatus(), "pull beyond the end");
            assertEquals(5, beyond.getNextBeginOffset(), "nextBeginOffset of a pull beyond the end (the max offset)");

            // A held pull is answered as soon as a message comes.
            long start = System.nanoTime();
            Thread sender = new Thread(() -> {
                try {
                    Thread.sleep(1000);
                    producer.send(new Message(topic, "TagA", "late", utf8("late")), q0);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            sender.start();
            PullResult held = consumer.pullBlockIfNotFound(q0, "*", 5, 32);
            long ms = (System.nanoTime() - start) / 1_000_000;
            sender.join();
            assertEquals(PullStatus.FOUND, held.getPullStatus(), "held pull");
            assertEquals("late", held.getMsgFoundList().get(0).getKeys(), "the message that ended the hold");
            assertTrue(ms >= 900 && ms < 10_000, "the held pull ended after " + ms + " ms");

            // Offsets kept by the broker: persisted, then read back from it.
            consumer.updateConsumeOffset(q0, 4);
            consumer.getOffsetStore().persist(q0);
            await(Duration.ofSeconds(10), () -> {
                try {
                    return consumer.fetchConsumeOffset(q0, true) == 4;
                } catch (Exception e) {
                    return false;
                }
            }, () -> "the committed offset of queue 0 read back from the broker");
        } finally {
            consumer.shutdown();
        }
    }
}
