package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.text.SimpleDateFormat;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.junit.jupiter.api.Test;

/**
 * Where a new group starts (ConsumeFromWhere: the last offset, a timestamp), and SQL92
 * subscriptions: one that does not compile refused at start, one that does getting exactly the
 * matching messages.
 */
class ConsumeFromTest extends CompatTest {

    private static List<String> send(DefaultMQProducer p, String topic, String prefix, int n) throws Exception {
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ids.add(p.send(new Message(topic, "TagF", prefix + i, utf8(prefix + i))).getMsgId());
        }
        return ids;
    }

    private DefaultMQPushConsumer start(String topic, Collector c, ConsumeFromWhere from, String timestamp) throws Exception {
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.setConsumeFromWhere(from);
        if (timestamp != null) {
            consumer.setConsumeTimestamp(timestamp);
        }
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        return consumer;
    }

    @Test
    void lastOffsetSkipsWhatCameBefore() throws Exception {
        String topic = topic("last", 2);
        DefaultMQProducer producer = producer(name("pg"));
        List<String> old = send(producer, topic, "old-", 4);
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = start(topic, c, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, null);
        // Bolide answers QUERY_CONSUMER_OFFSET with QUERY_NOT_FOUND for a new group, so the client
        // starts at GET_MAX_OFFSET (a Java broker answers 0 while the queue's start is in memory,
        // and the group replays the queue: docs/rocketmq-compat/pull.md).
        await(Duration.ofSeconds(30), () -> consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl()
                .getProcessQueueTable().keySet().stream().filter(q -> q.getTopic().equals(topic)).count() == 2,
                () -> "the consumer holds both queues");
        Thread.sleep(500);
        List<String> fresh = send(producer, topic, "new-", 3);
        c.awaitDistinct(fresh.size(), Duration.ofSeconds(30));
        Thread.sleep(1000);
        List<String> got = new ArrayList<>();
        for (String id : old) {
            if (c.first(id) != null) {
                got.add(id);
            }
        }
        assertEquals(List.of(), got, "messages from before the start consumed with CONSUME_FROM_LAST_OFFSET");
        assertEquals(new TreeSet<>(fresh), new TreeSet<>(idsOf(c, fresh)), "messages after the start");
        assertEquals(Map.of(), c.duplicates(), "consumed twice");
    }

    private static List<String> idsOf(Collector c, List<String> ids) {
        List<String> out = new ArrayList<>();
        for (String id : ids) {
            if (c.first(id) != null) {
                out.add(id);
            }
        }
        return out;
    }

    @Test
    void timestampStartsAtTheFirstMessageStoredSince() throws Exception {
        String topic = topic("timestamp", 2);
        DefaultMQProducer producer = producer(name("pg"));
        List<String> old = send(producer, topic, "old-", 4);
        // consumeTimestamp has whole seconds: wait past the next second boundary.
        Thread.sleep(1200);
        String ts = new SimpleDateFormat("yyyyMMddHHmmss").format(new Date());
        Thread.sleep(100);
        List<String> fresh = send(producer, topic, "new-", 4);
        Collector c = new Collector();
        start(topic, c, ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, ts);
        c.awaitDistinct(fresh.size(), Duration.ofSeconds(30));
        Thread.sleep(1000);
        assertEquals(List.of(), idsOf(c, old), "messages stored before " + ts + " consumed");
        assertEquals(fresh.size(), idsOf(c, fresh).size(), "messages stored since " + ts);
    }

    @Test
    void sqlSubscriptionThatDoesNotCompileIsRefusedAtStart() throws Exception {
        String topic = topic("sql", 1);
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, MessageSelector.bySql("a >"));
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        // The client asks the broker first (CHECK_CLIENT_CONFIG): SUBSCRIPTION_PARSE_FAILED.
        MQClientException e = assertThrows(MQClientException.class, consumer::start, "a SQL92 subscription that does not compile starts");
        assertEquals(23, e.getResponseCode(), e.getMessage());
    }

    @Test
    void sqlSubscriptionGetsExactlyTheMatchingMessages() throws Exception {
        String topic = topic("sqlok", 2);
        DefaultMQProducer producer = producer(name("pg"));
        List<String> want = new ArrayList<>();
        List<String> all = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            Message m = new Message(topic, i % 3 == 0 ? "void" : "paid", "k" + i, utf8("sql-" + i));
            m.putUserProperty("region", i % 2 == 0 ? "eu" : "us");
            if (i % 5 != 0) {
                m.putUserProperty("amount", Integer.toString(i));
            }
            String id = producer.send(m).getMsgId();
            all.add(id);
            if (i % 2 == 0 && i % 5 != 0 && i >= 50 && i % 3 != 0) {
                want.add(id);
            }
        }
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, MessageSelector.bySql("region = 'eu' AND amount >= 50 AND TAGS <> 'void'"));
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        c.awaitDistinct(want.size(), Duration.ofSeconds(30));
        Thread.sleep(1000);
        assertEquals(new TreeSet<>(want), new TreeSet<>(idsOf(c, all)), "the messages the condition selects");
        assertEquals(Map.of(), c.duplicates(), "consumed twice");
    }
}
