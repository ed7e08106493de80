package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.junit.jupiter.api.Test;

/** Request-reply (DefaultMQProducer.request) and a send to a topic nobody created. */
class RequestReplyTest extends CompatTest {

    @Test
    void requestGetsTheReply() throws Exception {
        String topic = topic("request", 2);
        List<String> errors = new CopyOnWriteArrayList<>();
        // The responder replies with MessageUtil.createReplyMessage (topic <cluster>_REPLY_TOPIC,
        // SEND_REPLY_MESSAGE); the broker pushes the reply to the requester's connection.
        DefaultMQProducer replier = producer(name("reply-pg"));
        // Apache RocketMQ's broker creates <cluster>_REPLY_TOPIC when it starts; the replier's producer
        // needs its route. Without it, create it to check the rest, and fail at the end.
        String replyTopic = "DefaultCluster_REPLY_TOPIC";
        String missingReplyTopic = null;
        try {
            replier.fetchPublishMessageQueues(replyTopic);
        } catch (MQClientException e) {
            missingReplyTopic = replyTopic + " has no route (Apache RocketMQ's broker creates it at start): " + e.getMessage();
            cluster.createTopic(replyTopic, 1);
        }
        DefaultMQPushConsumer responder = pushConsumer(name("cg"));
        responder.subscribe(topic, "*");
        responder.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    Message reply = MessageUtil.createReplyMessage(m, utf8("re: " + str(m.getBody())));
                    reply.putUserProperty("answered-by", "responder");
                    replier.send(reply);
                } catch (Exception e) {
                    errors.add(e.toString());
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        responder.start();

        DefaultMQProducer requester = producer(name("pg"));
        for (int i = 0; i < 3; i++) {
            Message req = new Message(topic, "TagRq", "req-" + i, utf8("question " + i));
            Message reply = requester.request(req, 15_000);
            assertNotNull(reply, "reply to request " + i + " (responder errors: " + errors + ")");
            assertEquals("re: question " + i, str(reply.getBody()), "reply body");
            assertEquals("responder", reply.getUserProperty("answered-by"), "reply user property");
        }
        assertEquals(List.of(), errors, "responder errors");
        assertNull(missingReplyTopic, "the reply topic");
    }

    @Test
    void sendToATopicNobodyCreatedFails() throws Exception {
        DefaultMQProducer producer = producer(name("pg"));
        String missing = name("missing");
        long start = System.nanoTime();
        MQClientException e = assertThrows(MQClientException.class,
                () -> producer.send(new Message(missing, "T", utf8("x"))),
                "sending to " + missing + " (no route, no auto-create)");
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(String.valueOf(e.getMessage()).contains("No route info"), "the client's error: " + e.getMessage());
        assertTrue(ms < 10_000, "the refusal took " + ms + " ms");
    }
}
