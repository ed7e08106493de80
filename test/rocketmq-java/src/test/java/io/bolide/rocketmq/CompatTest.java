package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Base of the compatibility tests: the shared cluster, names of their own for every test, and
 * RocketMQ clients pointed at the cluster and shut down after each test (last made, first shut).
 *
 * <p>Clients are configured as an application would configure them: a NameServer address, a group,
 * and an instance name of their own (so that each client has its own MQClientInstance and
 * connections, as separate applications would). Anything else a test changes says why.
 */
@ExtendWith(BolideExtension.class)
@Timeout(value = 120)
public abstract class CompatTest {

    private static final AtomicInteger SEQ = new AtomicInteger();

    /**
     * Tells this run's names from an earlier run's: clients keep state of their own by group and
     * client id (a broadcasting consumer's offsets in rocketmq.client.localOffsetStoreDir).
     */
    private static final String RUN = Long.toString(System.currentTimeMillis() % 1_000_000_000L, 36);

    /** The cluster of the run. */
    protected static BolideCluster cluster;

    private final Deque<Runnable> shutdowns = new ArrayDeque<>();

    @BeforeAll
    static void attachCluster(BolideCluster c) {
        cluster = c;
    }

    @AfterEach
    void shutdownClients() {
        while (!shutdowns.isEmpty()) {
            try {
                shutdowns.pop().run();
            } catch (RuntimeException e) {
                System.err.println("shutting a client down: " + e);
            }
        }
    }

    /** A name unique in the run: letters, digits, '-' and '_' only (RocketMQ's topic rule). */
    protected String name(String what) {
        return "J" + getClass().getSimpleName().replace("Test", "") + "_" + what + "_" + RUN + "_" + SEQ.incrementAndGet();
    }

    /** A topic of its own with {@code queues} queues, created and routed. */
    protected String topic(String what, int queues) {
        String t = name(what);
        cluster.createTopic(t, queues);
        return t;
    }

    /** A started producer of group {@code group}. */
    protected DefaultMQProducer producer(String group) throws MQClientException {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(cluster.namesrvAddr());
        p.setInstanceName(group + "-" + SEQ.incrementAndGet());
        p.start();
        shutdowns.push(p::shutdown);
        return p;
    }

    /** A transactional producer, not started (the caller sets its listener). Shut down after the test. */
    protected TransactionMQProducer transactionProducer(String group) {
        TransactionMQProducer p = new TransactionMQProducer(group);
        p.setNamesrvAddr(cluster.namesrvAddr());
        p.setInstanceName(group + "-" + SEQ.incrementAndGet());
        shutdowns.push(p::shutdown);
        return p;
    }

    /**
     * A push consumer of group {@code group}, not started, reading a new group's queues from their
     * first offset. Shut down after the test.
     */
    protected DefaultMQPushConsumer pushConsumer(String group) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(cluster.namesrvAddr());
        c.setInstanceName(group + "-" + SEQ.incrementAndGet());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        shutdowns.push(c::shutdown);
        return c;
    }

    /** A lite pull consumer of group {@code group}, not started, from the first offset. Shut down after the test. */
    protected DefaultLitePullConsumer litePullConsumer(String group) {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
        c.setNamesrvAddr(cluster.namesrvAddr());
        c.setInstanceName(group + "-" + SEQ.incrementAndGet());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        shutdowns.push(c::shutdown);
        return c;
    }

    /** Waits until {@code cond} holds, failing with {@code what} after {@code timeout}. */
    protected static void await(Duration timeout, BooleanSupplier cond, Supplier<String> what) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("after " + timeout + ": " + what.get());
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                fail("interrupted while waiting: " + what.get());
            }
        }
    }

    protected static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    protected static String str(byte[] b) {
        return new String(b, StandardCharsets.UTF_8);
    }
}
