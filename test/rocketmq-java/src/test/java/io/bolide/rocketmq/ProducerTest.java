package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.junit.jupiter.api.Test;

/** DefaultMQProducer's send modes, checked at a DefaultMQPushConsumer. */
class ProducerTest extends CompatTest {

    private static final Duration CONSUME_TIMEOUT = Duration.ofSeconds(40);

    private static Message message(String topic, int i) {
        Message m = new Message(topic, "TagA", "key-" + i, utf8("body " + i));
        m.putUserProperty("seq", String.valueOf(i));
        m.putUserProperty("user-prop", "value " + i);
        return m;
    }

    /** Starts a concurrent push consumer of topic into c. */
    private void consumeInto(String topic, Collector c) throws Exception {
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
    }

    /** Keys, tags, user properties and body of a consumed message are what message(topic, i) had. */
    private static void assertContent(int i, MessageExt m) {
        assertEquals("key-" + i, m.getKeys(), "keys");
        assertEquals("TagA", m.getTags(), "tags");
        assertEquals(String.valueOf(i), m.getUserProperty("seq"), "user property seq");
        assertEquals("value " + i, m.getUserProperty("user-prop"), "user property user-prop");
        assertEquals("body " + i, str(m.getBody()), "body");
    }

    private static void assertSendOk(SendResult sr, String topic) {
        assertEquals(SendStatus.SEND_OK, sr.getSendStatus(), "send status");
        assertNotNull(sr.getMsgId(), "msgId");
        assertNotNull(sr.getOffsetMsgId(), "offsetMsgId");
        assertNotEquals(sr.getMsgId(), sr.getOffsetMsgId(), "msgId is the UNIQ_KEY, not the offset id");
        assertEquals(topic, sr.getMessageQueue().getTopic(), "topic");
        assertEquals("broker-a", sr.getMessageQueue().getBrokerName(), "broker name");
        assertTrue(sr.getQueueOffset() >= 0, "queue offset " + sr.getQueueOffset());
    }

    @Test
    void syncSend() throws Exception {
        String topic = topic("sync", 4);
        DefaultMQProducer producer = producer(name("pg"));
        List<SendResult> results = new ArrayList<>();
        Map<Integer, Long> nextOffset = new HashMap<>();
        for (int i = 0; i < 12; i++) {
            Message m = message(topic, i);
            SendResult sr = producer.send(m);
            assertSendOk(sr, topic);
            assertEquals(MessageClientIDSetter.getUniqID(m), sr.getMsgId(), "msgId is the UNIQ_KEY the client set");
            // A new topic's queues count from 0, one by one.
            int q = sr.getMessageQueue().getQueueId();
            assertEquals(nextOffset.getOrDefault(q, 0L), sr.getQueueOffset(), "queue offset in queue " + q);
            nextOffset.put(q, sr.getQueueOffset() + 1);
            results.add(sr);
        }
        assertEquals(4, nextOffset.size(), "round robin over the 4 queues: " + nextOffset);

        Collector c = new Collector();
        consumeInto(topic, c);
        c.awaitDistinct(results.size(), CONSUME_TIMEOUT);
        for (int i = 0; i < results.size(); i++) {
            MessageExt m = c.first(results.get(i).getMsgId());
            Collector.assertMatches(results.get(i), m);
            assertContent(i, m);
            assertEquals("broker-a", m.getBrokerName(), "broker name");
        }
        assertEquals(Map.of(), c.duplicates(), "consumed twice");
    }

    @Test
    void asyncSend() throws Exception {
        String topic = topic("async", 4);
        DefaultMQProducer producer = producer(name("pg"));
        int n = 12;
        Map<Integer, SendResult> results = new ConcurrentHashMap<>();
        List<Throwable> errors = new CopyOnWriteArrayList<>();
        CountDownLatch done = new CountDownLatch(n);
        for (int i = 0; i < n; i++) {
            final int seq = i;
            producer.send(message(topic, i), new SendCallback() {
                @Override
                public void onSuccess(SendResult sr) {
                    results.put(seq, sr);
                    done.countDown();
                }

                @Override
                public void onException(Throwable e) {
                    errors.add(e);
                    done.countDown();
                }
            });
        }
        assertTrue(done.await(30, TimeUnit.SECONDS), "callbacks: " + (n - done.getCount()) + " of " + n);
        assertEquals(List.of(), errors, "send errors");
        for (SendResult sr : results.values()) {
            assertSendOk(sr, topic);
        }

        Collector c = new Collector();
        consumeInto(topic, c);
        c.awaitDistinct(n, CONSUME_TIMEOUT);
        for (int i = 0; i < n; i++) {
            MessageExt m = c.first(results.get(i).getMsgId());
            Collector.assertMatches(results.get(i), m);
            assertContent(i, m);
        }
        assertEquals(Map.of(), c.duplicates(), "consumed twice");
    }

    @Test
    void onewaySend() throws Exception {
        String topic = topic("oneway", 4);
        DefaultMQProducer producer = producer(name("pg"));
        int n = 12;
        Map<String, Integer> idToSeq = new HashMap<>();
        for (int i = 0; i < n; i++) {
            Message m = message(topic, i);
            producer.sendOneway(m);
            idToSeq.put(MessageClientIDSetter.getUniqID(m), i);
        }

        Collector c = new Collector();
        consumeInto(topic, c);
        c.awaitDistinct(n, CONSUME_TIMEOUT);
        for (Map.Entry<String, Integer> e : idToSeq.entrySet()) {
            MessageExt m = c.first(e.getKey());
            assertNotNull(m, "oneway message " + e.getValue() + " (" + e.getKey() + ") consumed");
            assertContent(e.getValue(), m);
            Collector.assertOffsetMsgId(m);
        }
        assertEquals(Map.of(), c.duplicates(), "consumed twice");
    }

    @Test
    void batchSend() throws Exception {
        String topic = topic("batch", 4);
        DefaultMQProducer producer = producer(name("pg"));
        int n = 10;
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            batch.add(message(topic, i));
        }
        SendResult sr = producer.send(batch);
        assertEquals(SendStatus.SEND_OK, sr.getSendStatus(), "batch send status");
        // A batch's result lists the messages' ids, comma-separated, in order; queueOffset is the first one's.
        String[] ids = sr.getMsgId().split(",");
        assertEquals(n, ids.length, "msgIds in the batch result: " + sr.getMsgId());
        assertNotNull(sr.getOffsetMsgId(), "offsetMsgId");
        String[] offsetIds = sr.getOffsetMsgId().split(",");
        assertEquals(n, offsetIds.length, "offsetMsgIds in the batch result: " + sr.getOffsetMsgId());
        assertEquals(0, sr.getQueueOffset(), "first queue offset of a batch into a new topic");

        Collector c = new Collector();
        consumeInto(topic, c);
        c.awaitDistinct(n, CONSUME_TIMEOUT);
        for (int i = 0; i < n; i++) {
            MessageExt m = c.first(ids[i]);
            assertNotNull(m, "batch message " + i + " (" + ids[i] + ") consumed");
            assertContent(i, m);
            assertEquals(sr.getMessageQueue().getQueueId(), m.getQueueId(), "one batch, one queue");
            assertEquals(sr.getQueueOffset() + i, m.getQueueOffset(), "consecutive queue offsets");
            assertEquals(offsetIds[i], ((org.apache.rocketmq.common.message.MessageClientExt) m).getOffsetMsgId(),
                    "offsetMsgId of batch message " + i);
            Collector.assertOffsetMsgId(m);
        }
        assertEquals(Map.of(), c.duplicates(), "consumed twice");
    }

    @Test
    void compressedBodyAndManyKeys() throws Exception {
        String topic = topic("compressed", 2);
        DefaultMQProducer producer = producer(name("pg"));
        // Bodies over compressMsgBodyOverHowmuch (4 KiB) go compressed, with the COMPRESSED sysflag.
        StringBuilder sb = new StringBuilder();
        java.util.Random rnd = new java.util.Random(16);
        while (sb.length() < 256 * 1024) {
            sb.append("line ").append(sb.length()).append(' ').append(rnd.nextInt(1000)).append(" héllo wörld ✓\n");
        }
        String big = sb.toString();
        Message m = new Message(topic, "TagZ", utf8(big));
        m.setKeys(List.of("first-key", "second-key", "third-key"));
        m.putUserProperty("unicode", "naïve ✓ 名前");
        SendResult sr = producer.send(m);
        assertSendOk(sr, topic);
        Message small = new Message(topic, "TagZ", "small-key", utf8("small"));
        SendResult srSmall = producer.send(small);
        assertSendOk(srSmall, topic);

        Collector c = new Collector();
        consumeInto(topic, c);
        c.awaitDistinct(2, CONSUME_TIMEOUT);
        MessageExt got = c.first(sr.getMsgId());
        Collector.assertMatches(sr, got);
        assertEquals(big.length(), str(got.getBody()).length(), "length of the decompressed body");
        assertEquals(big, str(got.getBody()), "decompressed body");
        assertEquals("first-key second-key third-key", got.getKeys(), "keys (space-separated)");
        assertEquals("naïve ✓ 名前", got.getUserProperty("unicode"), "unicode user property");
        assertEquals("TagZ", got.getTags(), "tags");
        Collector.assertMatches(srSmall, c.first(srSmall.getMsgId()));
        assertEquals("small", str(c.first(srSmall.getMsgId()).getBody()), "small body");
    }

    @Test
    void orderedSendBySelector() throws Exception {
        String topic = topic("ordered", 4);
        DefaultMQProducer producer = producer(name("pg"));
        int keys = 6;
        int perKey = 15;
        Map<String, Integer> queueOfKey = new HashMap<>();
        List<SendResult> results = new ArrayList<>();
        for (int s = 0; s < perKey; s++) {
            for (int k = 0; k < keys; k++) {
                String key = "order-" + k;
                Message m = new Message(topic, "TagA", key, utf8(key + ":" + s));
                m.putUserProperty("seq", String.valueOf(s));
                SendResult sr = producer.send(m, (List<MessageQueue> mqs, Message msg, Object arg) ->
                        mqs.get(Math.floorMod(arg.hashCode(), mqs.size())), key);
                assertEquals(SendStatus.SEND_OK, sr.getSendStatus());
                Integer before = queueOfKey.putIfAbsent(key, sr.getMessageQueue().getQueueId());
                if (before != null) {
                    assertEquals(before, sr.getMessageQueue().getQueueId(), "the selector keeps a key on one queue");
                }
                results.add(sr);
            }
        }

        // An orderly consumer sees each key's messages in the order sent.
        Map<String, List<Integer>> seen = new ConcurrentHashMap<>();
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                seen.computeIfAbsent(m.getKeys(), x -> new CopyOnWriteArrayList<>())
                        .add(Integer.parseInt(m.getUserProperty("seq")));
            }
            c.addAll(msgs);
            return ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();
        c.awaitDistinct(keys * perKey, CONSUME_TIMEOUT);
        for (int k = 0; k < keys; k++) {
            List<Integer> want = new ArrayList<>();
            for (int s = 0; s < perKey; s++) {
                want.add(s);
            }
            assertEquals(want, seen.get("order-" + k), "order of key order-" + k);
        }
        for (SendResult sr : results) {
            Collector.assertMatches(sr, c.first(sr.getMsgId()));
        }
        assertEquals(Map.of(), c.duplicates(), "consumed twice");
    }
}
