package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.junit.jupiter.api.Test;

/**
 * Delayed delivery: delay levels (setDelayTimeLevel) and RocketMQ 5's timer properties
 * (setDelayTimeMs, setDeliverTimeMs). A message is never delivered before its time.
 */
class DelayTest extends CompatTest {

    /** How late a delayed message may be (a loaded machine; the broker ticks well under a second). */
    private static final long LATE_MS = 8000;

    /** Sends one message per entry (modifier applied), then checks each arrives no earlier than due. */
    private void checkDelays(String what, Map<String, Long> delayMsByKey,
                             java.util.function.BiConsumer<Message, Long> delay) throws Exception {
        String topic = topic(what, 2);
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        DefaultMQProducer producer = producer(name("pg"));

        Map<String, Long> sentAt = new LinkedHashMap<>();
        Map<String, String> idOfKey = new LinkedHashMap<>();
        // One message without a delay first: when it arrives, the consumer is surely pulling.
        SendResult plain = producer.send(new Message(topic, "plain", "plain", utf8("plain")));
        c.awaitDistinct(1, Duration.ofSeconds(40));
        assertEquals(1, c.deliveries(plain.getMsgId()).size(), "the undelayed message is consumed");

        for (Map.Entry<String, Long> e : delayMsByKey.entrySet()) {
            Message m = new Message(topic, "delayed", e.getKey(), utf8("delayed " + e.getKey()));
            m.putUserProperty("want-delay-ms", String.valueOf(e.getValue()));
            long before = System.currentTimeMillis();
            delay.accept(m, e.getValue());
            SendResult sr = producer.send(m);
            assertEquals(SendStatus.SEND_OK, sr.getSendStatus(), "send of " + e.getKey());
            sentAt.put(e.getKey(), before);
            idOfKey.put(e.getKey(), sr.getMsgId());
        }
        long maxDelay = delayMsByKey.values().stream().mapToLong(Long::longValue).max().orElse(0);
        c.awaitDistinct(1 + delayMsByKey.size(), Duration.ofMillis(maxDelay + LATE_MS + 5000));
        for (Map.Entry<String, Long> e : delayMsByKey.entrySet()) {
            String key = e.getKey();
            assertEquals(1, c.deliveries(idOfKey.get(key)).size(), "deliveries of " + key);
            Collector.Delivery d = c.deliveries(idOfKey.get(key)).get(0);
            MessageExt m = d.msg();
            long took = d.atMillis() - sentAt.get(key);
            assertTrue(took >= e.getValue(), key + " delivered after " + took + " ms, before its delay of " + e.getValue() + " ms");
            assertTrue(took <= e.getValue() + LATE_MS, key + " delivered after " + took + " ms, delay " + e.getValue() + " ms");
            assertEquals(topic, m.getTopic(), "topic of the delivered message (not the schedule topic)");
            assertEquals(key, m.getKeys(), "keys");
            assertEquals("delayed", m.getTags(), "tags");
            assertEquals(String.valueOf(e.getValue()), m.getUserProperty("want-delay-ms"), "user property");
            assertEquals("delayed " + key, str(m.getBody()), "body");
            Collector.assertOffsetMsgId(m);
        }
    }

    @Test
    void delayLevels() throws Exception {
        Map<String, Long> delays = new LinkedHashMap<>();
        delays.put("level-1", BolideCluster.delayLevelSeconds(1) * 1000);
        delays.put("level-2", BolideCluster.delayLevelSeconds(2) * 1000);
        checkDelays("level", delays, (m, ms) -> m.setDelayTimeLevel(m.getKeys().equals("level-1") ? 1 : 2));
    }

    @Test
    void timerProperties() throws Exception {
        Map<String, Long> delays = new LinkedHashMap<>();
        delays.put("delay-ms", 1500L);
        delays.put("delay-sec", 2000L);
        delays.put("deliver-ms", 2500L);
        checkDelays("timer", delays, (m, ms) -> {
            switch (m.getKeys()) {
                case "delay-ms" -> m.setDelayTimeMs(ms);
                case "delay-sec" -> m.setDelayTimeSec(ms / 1000);
                default -> m.setDeliverTimeMs(System.currentTimeMillis() + ms);
            }
        });
    }
}
