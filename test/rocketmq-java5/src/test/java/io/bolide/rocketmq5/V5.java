package io.bolide.rocketmq5;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.junit.jupiter.api.Assumptions;

/** What the tests share: the client provider and configuration, waiting, names and known gaps. */
final class V5 {

    static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private static final AtomicInteger SEQ = new AtomicInteger();
    private static final Properties GAPS = new Properties();

    static {
        try (InputStream in = V5.class.getResourceAsStream("/gaps.properties")) {
            if (in != null) {
                GAPS.load(in);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private V5() {
    }

    /** The client configuration for the cluster: TLS (the Java client's default) unless plaintext. */
    static ClientConfiguration config(BolideCluster cluster, boolean tls) {
        return ClientConfiguration.newBuilder()
                .setEndpoints(cluster.accessPoint())
                .enableSsl(tls)
                .setRequestTimeout(Duration.ofSeconds(5))
                .build();
    }

    /** The client configuration with the client's default transport (TLS). */
    static ClientConfiguration config(BolideCluster cluster) {
        return ClientConfiguration.newBuilder()
                .setEndpoints(cluster.accessPoint())
                .setRequestTimeout(Duration.ofSeconds(5))
                .build();
    }

    /** A topic or group name unique to this run. */
    static String uniq(String prefix) {
        return prefix + "-" + ProcessHandle.current().pid() + "-" + Long.toString(System.currentTimeMillis(), 36)
                + "-" + SEQ.incrementAndGet();
    }

    /**
     * Skips the calling test when src/test/resources/gaps.properties names a server piece it
     * needs that Bolide lacks (test key = missing piece), unless BOLIDE_RUN_GAPS=1.
     */
    static void skipIfGap(String key) {
        String reason = GAPS.getProperty(key);
        if (reason != null && !"1".equals(System.getenv("BOLIDE_RUN_GAPS"))) {
            Assumptions.abort("server lacks: " + reason);
        }
    }

    /**
     * Polls until the condition holds and returns its value; fails with what describes the last
     * state when the bound passes (a bound on waiting, not an assertion on time).
     */
    static <T> T waitFor(String what, Duration bound, Callable<T> condition) throws Exception {
        long deadline = System.nanoTime() + bound.toNanos();
        Object last = null;
        while (true) {
            try {
                T v = condition.call();
                if (v != null && !Boolean.FALSE.equals(v)) {
                    return v;
                }
                last = v;
            } catch (Exception e) {
                last = e;
            }
            if (System.nanoTime() >= deadline) {
                throw new AssertionError("timed out after " + bound + " waiting for " + what + "; last: " + last,
                        last instanceof Throwable t ? t : null);
            }
            BolideCluster.sleep(200);
        }
    }

    /** Waits until the group has no lag on the topic (its acknowledgements reached the broker). */
    static void lagIsZero(BolideCluster cluster, String group, String topic) throws Exception {
        waitFor("group " + group + " to have no lag on " + topic, Duration.ofSeconds(30),
                () -> cluster.groupLag(group, topic) == 0);
    }
}
