package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.junit.jupiter.api.Test;

/**
 * TransactionMQProducer: a committed message is delivered, a rolled back one never is, and one left
 * UNKNOW by executeLocalTransaction is committed when the broker checks back (checkLocalTransaction,
 * over the producer's own connection).
 */
class TransactionTest extends CompatTest {

    @Test
    void commitRollbackAndCheckBack() throws Exception {
        String topic = topic("txn", 2);
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        Map<String, LocalTransactionState> decide = Map.of(
                "commit", LocalTransactionState.COMMIT_MESSAGE,
                "rollback", LocalTransactionState.ROLLBACK_MESSAGE,
                "unknown", LocalTransactionState.UNKNOW);
        List<String> executed = new CopyOnWriteArrayList<>();
        Map<String, List<MessageExt>> checked = new ConcurrentHashMap<>();
        TransactionMQProducer producer = transactionProducer(name("tpg"));
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                executed.add(msg.getKeys());
                return decide.get(msg.getKeys());
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checked.computeIfAbsent(msg.getKeys(), k -> new CopyOnWriteArrayList<>()).add(msg);
                // The undecided one is committed now; anything else checked keeps its first answer.
                return msg.getKeys().equals("unknown") ? LocalTransactionState.COMMIT_MESSAGE : decide.get(msg.getKeys());
            }
        });
        producer.start();

        Map<String, TransactionSendResult> results = new ConcurrentHashMap<>();
        for (String key : List.of("commit", "rollback", "unknown")) {
            Message m = new Message(topic, "TagT", key, utf8("txn " + key));
            m.putUserProperty("outcome", key);
            TransactionSendResult sr = producer.sendMessageInTransaction(m, "arg-" + key);
            assertEquals(SendStatus.SEND_OK, sr.getSendStatus(), "half message of " + key);
            assertEquals(decide.get(key), sr.getLocalTransactionState(), "local state of " + key);
            assertNotNull(sr.getTransactionId(), "transactionId of " + key);
            assertNotNull(sr.getMsgId(), "msgId of " + key);
            results.put(key, sr);
        }
        assertEquals(List.of("commit", "rollback", "unknown"), executed, "executeLocalTransaction calls");

        // The committed one arrives at once; the undecided one after a check-back (first after the
        // broker's transaction timeout).
        await(Duration.ofSeconds(40), () -> c.first(results.get("commit").getMsgId()) != null,
                () -> "the committed message was not consumed");
        await(Duration.ofSeconds(40), () -> c.first(results.get("unknown").getMsgId()) != null,
                () -> "the message committed at check-back was not consumed; checks: " + checked.keySet());
        List<MessageExt> checks = checked.get("unknown");
        assertNotNull(checks, "checkLocalTransaction was called for the undecided message");
        MessageExt check = checks.get(0);
        // The checked message is a plain MessageExt (getMsgId is its offset id); the client takes
        // the transaction id from its UNIQ_KEY.
        assertEquals(results.get("unknown").getMsgId(), check.getProperty("UNIQ_KEY"), "UNIQ_KEY of the checked message");
        assertEquals(results.get("unknown").getTransactionId(), check.getTransactionId(), "transactionId of the check");
        assertEquals(topic, check.getTopic(), "topic of the checked message");
        assertEquals("unknown", check.getUserProperty("outcome"), "user property of the checked message");

        for (String key : List.of("commit", "unknown")) {
            MessageExt m = c.first(results.get(key).getMsgId());
            assertEquals(key, m.getKeys(), "keys");
            assertEquals("TagT", m.getTags(), "tags");
            assertEquals(key, m.getUserProperty("outcome"), "user property");
            assertEquals("txn " + key, str(m.getBody()), "body");
            assertEquals(topic, m.getTopic(), "topic");
            assertEquals(1, c.deliveries(results.get(key).getMsgId()).size(), "deliveries of " + key);
            Collector.assertOffsetMsgId(m);
        }
        // The rolled back one never comes, not even after a few check intervals.
        Thread.sleep(3000);
        assertTrue(c.deliveries(results.get("rollback").getMsgId()).isEmpty(), "the rolled back message was consumed");
        assertEquals(2, c.distinct(), "messages consumed");
        assertTrue(!checked.containsKey("commit") && !checked.containsKey("rollback"),
                "decided messages are not checked back: " + checked.keySet());
    }
}
