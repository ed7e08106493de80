package io.bolide.rocketmq5;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * RocketMQ 5's Java client with credentials (it signs the date in upper-case hex) against a
 * NameServer and a broker that both have access control on: the right keys produce and consume; a
 * wrong secret is refused UNAUTHORIZED (40100), a user without the permission FORBIDDEN (40300),
 * and nothing of theirs is stored.
 */
@Timeout(180)
class AclTest {

    private static final String ADMIN = "javaadmin";
    private static final String PRODUCER = "javaproducer";
    private static final String CONSUMER = "javaconsumer";
    private static final String NOBODY = "javanobody";

    private static Path dir;
    private static BolideCluster cluster;

    private static String secret(String ak) {
        return ak + "-secret";
    }

    @BeforeAll
    static void start() throws IOException {
        dir = Files.createTempDirectory("bolide-java5-acl-");
        Path file = dir.resolve("plain_acl.yml");
        Files.writeString(file, String.join("\n",
                "accounts:",
                "  - accessKey: " + ADMIN, "    secretKey: " + secret(ADMIN), "    admin: true",
                "  - accessKey: " + PRODUCER, "    secretKey: " + secret(PRODUCER),
                "    defaultTopicPerm: DENY", "    defaultGroupPerm: DENY", "    topicPerms: [java-acl-*=PUB]",
                "  - accessKey: " + CONSUMER, "    secretKey: " + secret(CONSUMER),
                "    defaultTopicPerm: DENY", "    defaultGroupPerm: DENY", "    topicPerms: [java-acl-*=SUB]",
                "    groupPerms: [java-aclg-*=SUB]",
                "  - accessKey: " + NOBODY, "    secretKey: " + secret(NOBODY),
                "    defaultTopicPerm: DENY", "    defaultGroupPerm: DENY",
                ""), StandardCharsets.UTF_8);
        cluster = BolideCluster.start("acl", new BolideCluster.Acl(file, ADMIN, secret(ADMIN)));
    }

    @AfterAll
    static void stop() throws IOException {
        if (cluster != null) {
            cluster.close();
        }
        if (dir != null) {
            try (var files = Files.walk(dir)) {
                files.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
            }
        }
    }

    private static ClientConfiguration config(String accessKey, String secretKey) {
        return ClientConfiguration.newBuilder()
                .setEndpoints(cluster.accessPoint())
                .setRequestTimeout(Duration.ofSeconds(5))
                .setMaxStartupAttempts(1)
                .setCredentialProvider(new StaticSessionCredentialsProvider(accessKey, secretKey))
                .build();
    }

    /** Whether the response code appears in the exception or one of its causes. */
    private static boolean refusedWith(Throwable t, int code) {
        for (Throwable e = t; e != null; e = e.getCause()) {
            if (e.getMessage() != null && e.getMessage().contains("response-code=" + code)) {
                return true;
            }
        }
        return false;
    }

    private static String chain(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (Throwable e = t; e != null; e = e.getCause()) {
            b.append(e).append(" <- ");
        }
        return b.toString();
    }

    @Test
    void credentials() throws Exception {
        String topic = V5.uniq("java-acl");
        String group = V5.uniq("java-aclg");
        cluster.createTopic(topic, 2, "NORMAL");

        Set<String> sent = new HashSet<>();
        try (Producer producer = V5.PROVIDER.newProducerBuilder()
                .setClientConfiguration(config(PRODUCER, secret(PRODUCER))).setTopics(topic).build()) {
            for (int i = 0; i < 3; i++) {
                sent.add(producer.send(V5.PROVIDER.newMessageBuilder().setTopic(topic).setTag("acl")
                        .setBody(("allowed " + i).getBytes(StandardCharsets.UTF_8)).build()).getMessageId().toString());
            }
        }

        Throwable wrong = assertThrows(Throwable.class, () -> V5.PROVIDER.newProducerBuilder()
                .setClientConfiguration(config(PRODUCER, "not-the-secret")).setTopics(topic).build().close());
        assertTrue(refusedWith(wrong, 40100), "a wrong secret: " + chain(wrong));
        Throwable nobody = assertThrows(Throwable.class, () -> V5.PROVIDER.newProducerBuilder()
                .setClientConfiguration(config(NOBODY, secret(NOBODY))).setTopics(topic).build().close());
        assertTrue(refusedWith(nobody, 40300), "no permission: " + chain(nobody));
        // A user who may subscribe but not publish: the route is served, the send fails (the
        // broker refuses the Settings naming the topic and the send with FORBIDDEN; the client
        // reports a cancelled send). The consumer below proves nothing was stored.
        try (Producer reader = V5.PROVIDER.newProducerBuilder()
                .setClientConfiguration(config(CONSUMER, secret(CONSUMER))).build()) {
            assertThrows(Throwable.class, () -> reader.send(V5.PROVIDER.newMessageBuilder()
                    .setTopic(topic).setBody("forged".getBytes(StandardCharsets.UTF_8)).build()));
        }

        try (SimpleConsumer consumer = V5.PROVIDER.newSimpleConsumerBuilder()
                .setClientConfiguration(config(CONSUMER, secret(CONSUMER)))
                .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(5))
                .setSubscriptionExpressions(Map.of(topic, new FilterExpression("*", FilterExpressionType.TAG)))
                .build()) {
            Set<String> got = new HashSet<>();
            V5.waitFor("the producer's messages", Duration.ofSeconds(60), () -> {
                for (MessageView v : consumer.receive(16, Duration.ofSeconds(30))) {
                    got.add(v.getMessageId().toString());
                    consumer.ack(v);
                }
                return got.size() >= sent.size();
            });
            assertEquals(sent, got, "exactly the allowed messages were stored");
            List<MessageView> more = consumer.receive(16, Duration.ofSeconds(30));
            assertTrue(more.isEmpty(), "nothing else was stored: " + more);
        }
    }
}
