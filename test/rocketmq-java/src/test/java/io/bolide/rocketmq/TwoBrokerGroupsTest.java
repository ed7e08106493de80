package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.junit.jupiter.api.Test;

/**
 * Two broker groups (broker-a, broker-b) in one cluster: routes with two brokers, sends spread over
 * both, consumers and lookups reaching each, check-backs and dead letters from each.
 */
@BrokerGroups(2)
class TwoBrokerGroupsTest extends CompatTest {

    private static final Duration TIMEOUT = Duration.ofSeconds(40);

    @Test
    void sendConsumeAndLookUpOnBothGroups() throws Exception {
        String topic = topic("spread", 2);
        DefaultMQProducer producer = producer(name("pg"));
        List<SendResult> sent = new ArrayList<>();
        Map<String, Long> nextOffset = new HashMap<>();
        String key = name("key");
        for (int i = 0; i < 16; i++) {
            SendResult sr = producer.send(new Message(topic, "TagS", key, utf8("spread " + i)));
            assertEquals(SendStatus.SEND_OK, sr.getSendStatus());
            MessageQueue q = sr.getMessageQueue();
            String qk = q.getBrokerName() + "/" + q.getQueueId();
            assertEquals(nextOffset.getOrDefault(qk, 0L), sr.getQueueOffset(), "queue offset on " + qk);
            nextOffset.put(qk, sr.getQueueOffset() + 1);
            // The offset id names the broker that stored the message.
            InetSocketAddress host = (InetSocketAddress) MessageDecoder.decodeMessageId(sr.getOffsetMsgId()).getAddress();
            String addr = cluster.brokerAddrs().get(q.getBrokerName());
            assertEquals(addr.substring(addr.lastIndexOf(':') + 1), String.valueOf(host.getPort()),
                    "store host port in the offsetMsgId of a message on " + q.getBrokerName());
            sent.add(sr);
        }
        assertEquals(new TreeSet<>(List.of("broker-a/0", "broker-a/1", "broker-b/0", "broker-b/1")),
                new TreeSet<>(nextOffset.keySet()), "queues the producer sent to");

        Collector c = new Collector();
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        c.awaitDistinct(sent.size(), TIMEOUT);
        for (SendResult sr : sent) {
            MessageExt m = c.first(sr.getMsgId());
            Collector.assertMatches(sr, m);
            assertEquals(sr.getMessageQueue().getBrokerName(), m.getBrokerName(), "broker name");
        }
        assertEquals(Map.of(), c.duplicates(), "consumed twice");

        // Lookups reach the broker that has the message.
        for (SendResult sr : List.of(sent.get(0), sent.get(1), sent.get(2), sent.get(3))) {
            MessageExt m = producer.viewMessage(topic, sr.getOffsetMsgId());
            assertEquals(sr.getMsgId(), m.getProperty("UNIQ_KEY"), "viewMessage by offset id on " + sr.getMessageQueue().getBrokerName());
        }
        Set<String> found = new TreeSet<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (found.size() < sent.size() && System.nanoTime() < deadline) {
            QueryResult qr = producer.queryMessage(topic, key, 64, 0, System.currentTimeMillis() + 60_000);
            found.clear();
            qr.getMessageList().forEach(m -> found.add(m.getProperty("UNIQ_KEY")));
            if (found.size() < sent.size()) {
                Thread.sleep(200);
            }
        }
        Set<String> want = new TreeSet<>();
        sent.forEach(sr -> want.add(sr.getMsgId()));
        assertEquals(want, found, "queryMessage by key over both broker groups");
    }

    @Test
    void checkBacksComeFromEachGroup() throws Exception {
        String topic = topic("txn", 2);
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        Map<String, String> brokerOfCheck = new ConcurrentHashMap<>();
        TransactionMQProducer producer = transactionProducer(name("tpg"));
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                brokerOfCheck.putIfAbsent(msg.getKeys(), String.valueOf(((InetSocketAddress) msg.getStoreHost()).getPort()));
                return msg.getKeys().startsWith("commit") ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        producer.start();
        Map<String, SendResult> byKey = new TreeMap<>();
        for (String k : List.of("commit-0", "rollback-0", "commit-1", "rollback-1", "commit-2", "rollback-2", "commit-3", "rollback-3")) {
            SendResult sr = producer.sendMessageInTransaction(new Message(topic, "TagT", k, utf8(k)), null);
            assertEquals(SendStatus.SEND_OK, sr.getSendStatus(), "half message " + k);
            byKey.put(k, sr);
        }
        Set<String> brokersUsed = new TreeSet<>();
        byKey.values().forEach(sr -> brokersUsed.add(sr.getMessageQueue().getBrokerName()));
        assertEquals(Set.of("broker-a", "broker-b"), brokersUsed, "half messages on both groups");

        await(TIMEOUT, () -> byKey.entrySet().stream().filter(e -> e.getKey().startsWith("commit"))
                .allMatch(e -> c.first(e.getValue().getMsgId()) != null),
                () -> "committed at check-back and consumed: " + c.distinct() + "; checked: " + brokerOfCheck.keySet());
        Thread.sleep(2500);
        assertEquals(byKey.keySet(), brokerOfCheck.keySet(), "every undecided message checked back");
        for (Map.Entry<String, SendResult> e : byKey.entrySet()) {
            String addr = cluster.brokerAddrs().get(e.getValue().getMessageQueue().getBrokerName());
            assertEquals(addr.substring(addr.lastIndexOf(':') + 1), brokerOfCheck.get(e.getKey()),
                    "store host port of the checked message " + e.getKey() + " (the broker holding its half message)");
            boolean consumed = c.first(e.getValue().getMsgId()) != null;
            assertEquals(e.getKey().startsWith("commit"), consumed, e.getKey() + " consumed");
        }
    }

    @Test
    void deadLettersOnEachGroup() throws Exception {
        String topic = topic("dlq", 2);
        String group = name("cg");
        DefaultMQPushConsumer consumer = pushConsumer(group);
        consumer.setMaxReconsumeTimes(0); // the first failure is the last: straight to %DLQ%<group>
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> ConsumeConcurrentlyStatus.RECONSUME_LATER);
        consumer.start();
        DefaultMQProducer producer = producer(name("pg"));
        Map<String, SendResult> sent = new HashMap<>();
        for (int i = 0; i < 4; i++) {
            SendResult sr = producer.send(new Message(topic, "TagD", "dead-" + i, utf8("dead " + i)));
            sent.put(sr.getMsgId(), sr);
        }

        String dlq = MixAll.getDLQTopic(group);
        DefaultLitePullConsumer reader = litePullConsumer(name("dlq-reader"));
        reader.setPollNameServerInterval(1000);
        reader.start();
        // The dead-letter topic is made on each broker that has a dead letter: wait for both in the route.
        List<Collection<MessageQueue>> queues = new ArrayList<>();
        await(TIMEOUT, () -> {
            try {
                Collection<MessageQueue> mqs = reader.fetchMessageQueues(dlq);
                Set<String> brokers = new TreeSet<>();
                mqs.forEach(q -> brokers.add(q.getBrokerName()));
                if (brokers.size() == 2) {
                    queues.add(mqs);
                    return true;
                }
            } catch (Exception e) {
                // not routed yet
            }
            return false;
        }, () -> dlq + " is not routed on both broker groups");
        reader.assign(queues.get(0));
        Collector dead = new Collector();
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (dead.distinct() < sent.size() && System.nanoTime() < deadline) {
            dead.addAll(reader.poll(500));
        }
        assertEquals(sent.size(), dead.distinct(), "dead letters read from " + dlq);
        for (SendResult sr : sent.values()) {
            MessageExt m = dead.first(sr.getMsgId());
            assertNotNull(m, "dead letter of " + sr.getMsgId());
            assertEquals(sr.getMessageQueue().getBrokerName(), m.getBrokerName(), "the dead letter stays on its message's broker");
            assertEquals(topic, m.getProperty("RETRY_TOPIC"), "RETRY_TOPIC");
            assertTrue(m.getKeys().startsWith("dead-"), "keys");
        }
    }
}
