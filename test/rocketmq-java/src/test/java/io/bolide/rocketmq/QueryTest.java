package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.junit.jupiter.api.Test;

/**
 * The lookups every RocketMQ client has (MQAdmin, here on DefaultMQProducer): a message by its
 * offset id and by its unique id, messages by key, and a queue's min/max offset, earliest store time
 * and offset by time.
 */
class QueryTest extends CompatTest {

    @Test
    void viewAndQueryMessages() throws Exception {
        String topic = topic("query", 2);
        DefaultMQProducer producer = producer(name("pg"));
        String key = name("key");
        List<SendResult> sent = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            Message m = new Message(topic, "TagQ", i < 2 ? key : key + "-other", utf8("query body " + i));
            m.putUserProperty("seq", String.valueOf(i));
            sent.add(producer.send(m));
        }

        // By offset id: VIEW_MESSAGE_BY_ID to the store host the id names.
        SendResult first = sent.get(0);
        MessageExt byOffsetId = producer.viewMessage(topic, first.getOffsetMsgId());
        assertNotNull(byOffsetId, "message by offset id");
        assertEquals("query body 0", str(byOffsetId.getBody()), "body by offset id");
        assertEquals(key, byOffsetId.getKeys(), "keys by offset id");
        assertEquals(first.getMsgId(), byOffsetId.getProperty("UNIQ_KEY"), "UNIQ_KEY by offset id");
        assertEquals(first.getQueueOffset(), byOffsetId.getQueueOffset(), "queue offset by offset id");

        // By unique id: the client first reads it as an offset id (which fails), then queries the
        // index by unique key (QUERY_MESSAGE with uniqueKey).
        SendResult second = sent.get(1);
        MessageExt byUniqId = awaitView(producer, topic, second.getMsgId());
        assertEquals("query body 1", str(byUniqId.getBody()), "body by unique id");
        assertEquals(second.getMsgId(), byUniqId.getMsgId(), "msgId by unique id");
        assertEquals("1", byUniqId.getUserProperty("seq"), "user property by unique id");

        // By key: both messages with that key, not the third.
        Set<String> ids = new TreeSet<>();
        long end = System.currentTimeMillis() + 60_000;
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (ids.size() < 2 && System.nanoTime() < deadline) {
            QueryResult qr = producer.queryMessage(topic, key, 32, 0, end);
            ids.clear();
            for (MessageExt m : qr.getMessageList()) {
                assertEquals(key, m.getKeys(), "keys of a message found by key");
                ids.add(m.getProperty("UNIQ_KEY"));
            }
            if (ids.size() < 2) {
                Thread.sleep(200);
            }
        }
        assertEquals(new TreeSet<>(List.of(sent.get(0).getMsgId(), sent.get(1).getMsgId())), ids, "messages found by key " + key);
    }

    private static MessageExt awaitView(DefaultMQProducer producer, String topic, String id) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        Exception last = null;
        while (System.nanoTime() < deadline) {
            try {
                MessageExt m = producer.viewMessage(topic, id);
                if (m != null) {
                    return m;
                }
            } catch (Exception e) {
                last = e;
            }
            Thread.sleep(200);
        }
        throw new AssertionError("viewMessage(" + topic + ", " + id + ") found nothing", last);
    }

    @Test
    void queueOffsetsAndTimes() throws Exception {
        String topic = topic("offsets", 2);
        DefaultMQProducer producer = producer(name("pg"));
        MessageQueue q1 = new MessageQueue(topic, "broker-a", 1);
        SendResult first = producer.send(new Message(topic, "TagO", "k0", utf8("m0")), q1);
        Thread.sleep(100);
        long between = System.currentTimeMillis();
        Thread.sleep(100);
        for (int i = 1; i < 5; i++) {
            producer.send(new Message(topic, "TagO", "k" + i, utf8("m" + i)), q1);
        }
        MessageExt stored = producer.viewMessage(topic, first.getOffsetMsgId());

        assertEquals(0, producer.minOffset(q1), "min offset of queue 1");
        assertEquals(5, producer.maxOffset(q1), "max offset of queue 1");
        assertEquals(0, producer.maxOffset(new MessageQueue(topic, "broker-a", 0)), "max offset of the empty queue 0");
        assertEquals(stored.getStoreTimestamp(), producer.earliestMsgStoreTime(q1), "earliest store time of queue 1");
        assertEquals(1, producer.searchOffset(q1, between), "offset of the first message stored after " + between);
        assertEquals(0, producer.searchOffset(q1, stored.getStoreTimestamp()), "offset at the first message's store time");
        long far = producer.searchOffset(q1, System.currentTimeMillis() + 3_600_000);
        assertTrue(far == 5 || far == 4, "offset for a time after every message: " + far + " (RocketMQ answers the max offset)");
    }
}
