package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.junit.jupiter.api.Test;

/**
 * Namespaces (setNamespace, deprecated in 5.x but common): the client names topics and groups "ns%name" on the wire and strips
 * the namespace from what it hands the application; the broker takes such names as any other.
 */
@SuppressWarnings("deprecation")
class NamespaceTest extends CompatTest {

    @Test
    void namespacedProducerAndConsumer() throws Exception {
        String ns = name("ns");
        String topic = name("topic");
        cluster.createTopic(ns + "%" + topic, 2);

        DefaultMQProducer producer = new DefaultMQProducer(name("pg"));
        producer.setNamesrvAddr(cluster.namesrvAddr());
        producer.setNamespace(ns);
        producer.setInstanceName(name("pi"));
        producer.start();
        DefaultMQPushConsumer consumer = pushConsumer(name("cg"));
        consumer.setNamespace(ns);
        try {
            List<SendResult> sent = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                SendResult sr = producer.send(new Message(topic, "TagN", "key-" + i, utf8("ns " + i)));
                assertEquals(topic, sr.getMessageQueue().getTopic(), "the producer's result names the topic without the namespace");
                sent.add(sr);
            }
            Collector c = new Collector();
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                c.addAll(msgs);
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            c.awaitDistinct(sent.size(), Duration.ofSeconds(40));
            for (SendResult sr : sent) {
                MessageExt m = c.first(sr.getMsgId());
                Collector.assertMatches(sr, m);
                assertEquals(topic, m.getTopic(), "the consumed message's topic, without the namespace");
            }
            assertEquals(Map.of(), c.duplicates(), "consumed twice");
        } finally {
            producer.shutdown();
        }
    }
}
