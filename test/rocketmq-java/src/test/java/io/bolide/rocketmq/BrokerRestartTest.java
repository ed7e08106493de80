package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A broker restart (SIGTERM, or SIGKILL) under running Java clients: the producer and the push
 * consumer reconnect by themselves, the group's offsets survive (nothing consumed before is consumed again), and every
 * message sent after is consumed.
 */
@BrokerGroups(value = 1, dedicated = true)
class BrokerRestartTest extends CompatTest {

    @ParameterizedTest(name = "kill -9: {0}")
    @ValueSource(booleans = {false, true})
    void clientsCarryOnAcrossARestart(boolean kill) throws Exception {
        String topic = topic("restart", 2);
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        DefaultMQProducer producer = producer(name("pg"));
        List<String> before = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            before.add(producer.send(new Message(topic, "TagR", "before-" + i, utf8("before " + i))).getMsgId());
        }
        c.awaitDistinct(before.size(), Duration.ofSeconds(40));
        // The client commits offsets every 5 s (persistConsumerOffsetInterval): let it.
        Thread.sleep(6000);

        cluster.restartBroker(0, kill);

        // Sends while the clients notice: retried here until taken (the same message, so the same
        // msgId: a retried send that had been stored after all shows as a duplicate of that id).
        List<String> after = new ArrayList<>();
        Set<String> retried = new HashSet<>();
        for (int i = 0; i < 20; i++) {
            Message m = new Message(topic, "TagR", "after-" + i, utf8("after " + i));
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            SendResult sr = null;
            while (sr == null) {
                try {
                    sr = producer.send(m);
                } catch (Exception e) {
                    if (System.nanoTime() > deadline) {
                        throw e;
                    }
                    retried.add("after-" + i);
                    Thread.sleep(200);
                }
            }
            after.add(sr.getMsgId());
        }
        await(Duration.ofSeconds(60), () -> after.stream().allMatch(id -> c.first(id) != null),
                () -> "consumed after the restart: " + after.stream().filter(id -> c.first(id) != null).count() + " of 20");
        Thread.sleep(1000);
        for (String id : before) {
            assertEquals(1, c.deliveries(id).size(), "deliveries of " + id + ", consumed and committed before the restart");
        }
        Map<String, Integer> dups = c.duplicates();
        for (String id : dups.keySet()) {
            String key = c.first(id).getKeys();
            assertTrue(retried.contains(key), "message " + key + " consumed " + dups.get(id) + " times, and its send was not retried");
        }
    }
}
