package io.bolide.benchrmq;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

/**
 * rmqbench: the same workloads against any broker that speaks RocketMQ's remoting protocol, on
 * Apache RocketMQ's own Java client (rocketmq-client). scripts/bench-vs-rocketmq.sh runs it against
 * Apache RocketMQ and against Bolide. Each command prints one JSON line on stdout:
 *
 * <pre>
 * topic    --namesrv A --topic T[,T2...] [--queues 8]         create the topics on every broker of the cluster
 * produce  --namesrv A --topic T --count N [--mode sync|async|batch] [--producers P]
 *          [--batch B] [--inflight I] [--size S] [--warmup W]  send N messages as fast as they go
 * consume  --namesrv A --topic T --count N [--pull-batch B]    read N messages of a backlog, fresh group
 * e2e      --namesrv A --topic T [--rate R] [--duration D] [--warmup W] [--size S]
 *          [--senders T] [--send sync|async] [--inflight I] [--consume-threads C] [--consume-batch B]
 *          send on a fixed schedule from T threads (each its share; async: at most I of a thread's
 *          sends in flight) while a push consumer receives; latency from each message's scheduled
 *          send time to its receipt, and how late the sends left (sendLag)
 * </pre>
 *
 * <p>Figures: msgsPerSec (messages over the timed window), p50/p99/p999 in milliseconds (per send,
 * per batch for batch mode, or end to end), cpuSeconds (this JVM's CPU time during the timed window:
 * ProcessCpuTime, every thread).
 */
public final class RmqBench {

    private RmqBench() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage();
        }
        Map<String, String> f = flags(Arrays.copyOfRange(args, 1, args.length));
        int status;
        switch (args[0]) {
            case "topic" -> status = topic(f);
            case "produce" -> status = produce(f);
            case "consume" -> status = consume(f);
            case "e2e" -> status = e2e(f);
            default -> {
                usage();
                status = 2;
            }
        }
        System.out.flush();
        // The client's non-daemon threads (timers, netty) must not keep the JVM alive.
        Runtime.getRuntime().halt(status);
    }

    private static void usage() {
        System.err.println("usage: rmqbench topic|produce|consume|e2e --namesrv ADDR --topic T [flags]");
        System.exit(2);
    }

    private static Map<String, String> flags(String[] a) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < a.length; i++) {
            if (!a[i].startsWith("--") || i + 1 >= a.length) {
                throw new IllegalArgumentException("expected --flag value at " + a[i]);
            }
            m.put(a[i].substring(2), a[++i]);
        }
        return m;
    }

    private static String req(Map<String, String> f, String k) {
        String v = f.get(k);
        if (v == null) {
            throw new IllegalArgumentException("--" + k + " is required");
        }
        return v;
    }

    private static int num(Map<String, String> f, String k, int def) {
        return f.containsKey(k) ? Integer.parseInt(f.get(k)) : def;
    }

    /** Seconds of "30s", "500ms", "2m" or a bare number of seconds. */
    private static double secs(Map<String, String> f, String k, double def) {
        String v = f.get(k);
        if (v == null) {
            return def;
        }
        if (v.endsWith("ms")) {
            return Double.parseDouble(v.substring(0, v.length() - 2)) / 1000;
        }
        if (v.endsWith("s")) {
            return Double.parseDouble(v.substring(0, v.length() - 1));
        }
        if (v.endsWith("m")) {
            return Double.parseDouble(v.substring(0, v.length() - 1)) * 60;
        }
        return Double.parseDouble(v);
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    private static DefaultMQProducer producer(Map<String, String> f, String instance) throws Exception {
        return producer(f, instance, null);
    }

    /** A started producer; asyncExecutor, when not null, runs its asynchronous sends (see DirectExecutor). */
    private static DefaultMQProducer producer(Map<String, String> f, String instance, ExecutorService asyncExecutor)
            throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("rmqbench-" + instance);
        p.setNamesrvAddr(req(f, "namesrv"));
        p.setInstanceName("rmqbench-" + instance + "-" + UUID.randomUUID());
        p.setSendMsgTimeout(10_000);
        p.setMaxMessageSize(4 << 20);
        if (asyncExecutor != null) {
            p.setAsyncSenderExecutor(asyncExecutor);
        }
        p.start();
        return p;
    }

    /**
     * Runs each task in the calling thread. As the producer's async sender executor it makes send(msg,
     * callback) encode and write the request in the caller's thread and return (the response comes back
     * to the callback on the client's own threads), instead of queueing the send for the client's
     * default executor (one thread per CPU, a queue of 50 000): a queue that hides how late the sends
     * really leave and that a paced sender can silently fall behind in.
     */
    private static final class DirectExecutor extends AbstractExecutorService {
        private volatile boolean shutdown;

        @Override
        public void execute(Runnable r) {
            r.run();
        }

        @Override
        public void shutdown() {
            shutdown = true;
        }

        @Override
        public List<Runnable> shutdownNow() {
            shutdown = true;
            return List.of();
        }

        @Override
        public boolean isShutdown() {
            return shutdown;
        }

        @Override
        public boolean isTerminated() {
            return shutdown;
        }

        @Override
        public boolean awaitTermination(long timeout, TimeUnit unit) {
            return true;
        }
    }

    // ------------------------------------------------------------------ topic

    private static int topic(Map<String, String> f) throws Exception {
        int queues = num(f, "queues", 8);
        DefaultMQProducer p = producer(f, "admin");
        MQClientAPIImpl api = p.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
        for (String topic : req(f, "topic").split(",")) {
            createTopic(api, topic, queues);
        }
        p.shutdown();
        return 0;
    }

    private static void createTopic(MQClientAPIImpl api, String topic, int queues) throws Exception {
        // A broker that has just started may not be in the NameServer's cluster table yet.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        int created = 0;
        while (created == 0) {
            ClusterInfo ci = api.getBrokerClusterInfo(10_000);
            for (BrokerData bd : ci.getBrokerAddrTable().values()) {
                String addr = bd.getBrokerAddrs().get(0L);
                if (addr == null) {
                    continue;
                }
                api.createTopic(addr, "TBW102", new TopicConfig(topic, queues, queues, 6), 10_000);
                created++;
            }
            if (created == 0) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("no master broker in the cluster: " + ci.getBrokerAddrTable());
                }
                Thread.sleep(200);
            }
        }
        // Wait until the NameServer routes the topic (Bolide's broker registers it with its next
        // heartbeat; RocketMQ's at once).
        while (true) {
            try {
                TopicRouteData r = api.getTopicRouteInfoFromNameServer(topic, 5_000);
                if (r != null && !r.getQueueDatas().isEmpty()) {
                    break;
                }
            } catch (Exception e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no route for " + topic + " after 60 s");
            }
            Thread.sleep(100);
        }
        System.out.printf(Locale.ROOT, "{\"topic\":\"%s\",\"queues\":%d,\"brokers\":%d}%n", topic, queues, created);
    }

    // ---------------------------------------------------------------- produce

    private static Message message(String topic, byte[] body) {
        return new Message(topic, body);
    }

    private static int produce(Map<String, String> f) throws Exception {
        String topic = req(f, "topic");
        int count = Integer.parseInt(req(f, "count"));
        String mode = f.getOrDefault("mode", "sync");
        int producers = num(f, "producers", 1);
        int batch = num(f, "batch", 64);
        int inflight = num(f, "inflight", 16);
        int size = num(f, "size", 1024);
        int warmup = num(f, "warmup", Math.min(5_000, count / 10));
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        DefaultMQProducer p = producer(f, "producer");
        try {
            Sender s = switch (mode) {
                case "sync" -> new SyncSender(p, topic, body, producers);
                case "async" -> new AsyncSender(p, topic, body, 1, inflight);
                case "batch" -> new AsyncSender(p, topic, body, batch, inflight);
                default -> throw new IllegalArgumentException("--mode sync|async|batch");
            };
            if (warmup > 0) {
                s.run(warmup, null);
            }
            long[] lat = new long[count];
            long cpu0 = cpuNanos();
            long t0 = System.nanoTime();
            Result r = s.run(count, lat);
            long elapsed = System.nanoTime() - t0;
            long cpu = cpuNanos() - cpu0;
            long sent = count - r.errors;
            report("produce", mode, sent, r.errors, elapsed, Arrays.copyOf(lat, r.samples),
                    mode.equals("batch") ? "batch" : "send", cpu, r.firstError);
            return sent > 0 ? 0 : 1;
        } finally {
            p.shutdown();
        }
    }

    private record Result(long errors, int samples, String firstError) {
    }

    private interface Sender {
        /** Sends n messages; records each send's (or batch's) latency in lat when not null. */
        Result run(int n, long[] lat) throws Exception;
    }

    /** producers threads sending synchronously through one producer (one connection per broker). */
    private record SyncSender(DefaultMQProducer p, String topic, byte[] body, int producers) implements Sender {
        @Override
        public Result run(int n, long[] lat) throws Exception {
            AtomicLong errors = new AtomicLong();
            AtomicInteger next = new AtomicInteger();
            AtomicInteger samples = new AtomicInteger();
            AtomicReference<String> firstErr = new AtomicReference<>();
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < producers; t++) {
                Thread th = new Thread(() -> {
                    while (next.getAndIncrement() < n) {
                        long s = System.nanoTime();
                        try {
                            SendResult r = p.send(message(topic, body));
                            if (r.getSendStatus() != SendStatus.SEND_OK) {
                                firstErr.compareAndSet(null, "status " + r.getSendStatus());
                            }
                            if (lat != null) {
                                lat[samples.getAndIncrement()] = System.nanoTime() - s;
                            }
                        } catch (Exception e) {
                            errors.incrementAndGet();
                            firstErr.compareAndSet(null, e.toString());
                        }
                    }
                }, "sender-" + t);
                th.start();
                ts.add(th);
            }
            for (Thread th : ts) {
                th.join();
            }
            return new Result(errors.get(), samples.get(), firstErr.get());
        }
    }

    /** One thread sending batches of batch messages (1: single messages) asynchronously, inflight at a time. */
    private record AsyncSender(DefaultMQProducer p, String topic, byte[] body, int batch, int inflight)
            implements Sender {
        @Override
        public Result run(int n, long[] lat) throws Exception {
            Semaphore window = new Semaphore(inflight);
            AtomicLong errors = new AtomicLong();
            AtomicInteger samples = new AtomicInteger();
            AtomicReference<String> firstErr = new AtomicReference<>();
            int requests = (n + batch - 1) / batch;
            CountDownLatch done = new CountDownLatch(requests);
            for (int i = 0; i < requests; i++) {
                int k = Math.min(batch, n - i * batch);
                window.acquire();
                long s = System.nanoTime();
                SendCallback cb = new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        if (lat != null) {
                            lat[samples.getAndIncrement()] = System.nanoTime() - s;
                        }
                        window.release();
                        done.countDown();
                    }

                    @Override
                    public void onException(Throwable e) {
                        errors.addAndGet(k);
                        firstErr.compareAndSet(null, e.toString());
                        window.release();
                        done.countDown();
                    }
                };
                try {
                    if (batch == 1) {
                        p.send(message(topic, body), cb);
                    } else {
                        List<Message> ms = new ArrayList<>(k);
                        for (int j = 0; j < k; j++) {
                            ms.add(message(topic, body));
                        }
                        p.send(ms, cb);
                    }
                } catch (Exception e) {
                    cb.onException(e);
                }
            }
            if (!done.await(10, TimeUnit.MINUTES)) {
                throw new IllegalStateException("async sends did not complete in 10 minutes");
            }
            return new Result(errors.get(), samples.get(), firstErr.get());
        }
    }

    // ---------------------------------------------------------------- consume

    private static int consume(Map<String, String> f) throws Exception {
        String topic = req(f, "topic");
        int count = Integer.parseInt(req(f, "count"));
        int pullBatch = num(f, "pull-batch", 500);
        double idle = secs(f, "idle-timeout", 60);
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("rmqbench-consume-" + UUID.randomUUID());
        c.setNamesrvAddr(req(f, "namesrv"));
        c.setInstanceName("rmqbench-consume-" + UUID.randomUUID());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPullBatchSize(pullBatch);
        c.setPullThresholdForQueue(4 * pullBatch);
        c.setPullThresholdForAll(64 * pullBatch);
        c.setAutoCommit(true);
        c.subscribe(topic, "*");
        c.start();
        try {
            long n = 0;
            long first = 0;
            long last = 0;
            long cpu0 = 0;
            long lastSeen = System.nanoTime();
            while (n < count) {
                List<MessageExt> ms = c.poll(500);
                long now = System.nanoTime();
                if (ms.isEmpty()) {
                    if (now - lastSeen > (long) (idle * 1e9)) {
                        break;
                    }
                    continue;
                }
                if (first == 0) {
                    first = now;
                    cpu0 = cpuNanos();
                }
                n += ms.size();
                last = now;
                lastSeen = now;
            }
            long cpu = first == 0 ? 0 : cpuNanos() - cpu0;
            report("consume", "litepull", n, Math.max(0, count - n), last - first, new long[0], "none", cpu,
                    n < count ? "only " + n + " of " + count + " messages within the idle timeout" : null);
            return n >= count ? 0 : 1;
        } finally {
            c.shutdown();
        }
    }

    // -------------------------------------------------------------------- e2e

    /**
     * e2e: messages on a fixed schedule (message i is due at start + i / rate), sent by --senders
     * threads, each sending its share (i = k, k + senders, ...) when due: synchronously (--send sync,
     * one send in flight per thread) or asynchronously (--send async, at most --inflight sends of a
     * thread in flight; a thread at that bound waits; each send is encoded and written in the sending
     * thread: DirectExecutor). A push consumer receives them; a message's
     * latency runs from its scheduled send time to its receipt, so a sender that falls behind its
     * schedule shows in the latency (no coordinated omission). How late the sends went out
     * (sendLagP50/P99/Max: the send call's start minus the scheduled time) is reported beside, so that
     * a lagging client is told apart from a slow broker.
     */
    private static int e2e(Map<String, String> f) throws Exception {
        String topic = req(f, "topic");
        int rate = num(f, "rate", 10_000);
        double duration = secs(f, "duration", 30);
        double warmup = secs(f, "warmup", 1);
        int size = Math.max(16, num(f, "size", 1024));
        int senders = Math.max(1, num(f, "senders", 4));
        String sendMode = f.getOrDefault("send", "async");
        int inflight = Math.max(1, num(f, "inflight", 128));
        int consumeThreads = Math.max(1, num(f, "consume-threads", 4));
        int consumeBatch = Math.max(1, num(f, "consume-batch", 32));
        if (!sendMode.equals("sync") && !sendMode.equals("async")) {
            throw new IllegalArgumentException("--send sync|async");
        }
        int total = (int) Math.round(rate * (duration + warmup));
        int untimed = (int) Math.round(rate * warmup);
        AtomicLongArray lat = new AtomicLongArray(total);
        long[] lag = new long[total]; // each index written by its one sender thread, read after join
        AtomicLong received = new AtomicLong();
        AtomicLong probes = new AtomicLong();

        DefaultMQPushConsumer c = new DefaultMQPushConsumer("rmqbench-e2e-" + UUID.randomUUID());
        c.setNamesrvAddr(req(f, "namesrv"));
        c.setInstanceName("rmqbench-e2e-" + UUID.randomUUID());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        c.setConsumeThreadMin(consumeThreads);
        c.setConsumeThreadMax(consumeThreads);
        c.setConsumeMessageBatchMaxSize(consumeBatch);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            for (MessageExt m : msgs) {
                ByteBuffer b = ByteBuffer.wrap(m.getBody());
                long due = b.getLong(0);
                long idx = b.getLong(8);
                if (idx < 0) {
                    probes.incrementAndGet();
                } else if (idx < total && lat.compareAndSet((int) idx, 0, Math.max(1, now - due))) {
                    received.incrementAndGet();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        DefaultMQProducer p = producer(f, "e2e", sendMode.equals("async") ? new DirectExecutor() : null);
        try {
            // The consumer is ready once a probe comes back (its queues are assigned and pulled).
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (probes.get() == 0) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the consumer received no probe in 60 s");
                }
                p.send(message(topic, body(size, System.nanoTime(), -1)));
                Thread.sleep(200);
            }
            AtomicLong errors = new AtomicLong();
            AtomicLong windowWaits = new AtomicLong();
            AtomicReference<String> firstErr = new AtomicReference<>();
            // Every sender starts on the same schedule, a little ahead so that all are parked at the start.
            long start = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(100);
            double interval = 1e9 / rate;
            List<Thread> ts = new ArrayList<>();
            List<Semaphore> windows = new ArrayList<>();
            for (int k = 0; k < senders; k++) {
                int first = k;
                Semaphore window = new Semaphore(inflight);
                windows.add(window);
                Thread th = new Thread(() -> {
                    for (int i = first; i < total; i += senders) {
                        long due = start + (long) (i * interval);
                        long wait = due - System.nanoTime();
                        if (wait > 0) {
                            LockSupport.parkNanos(wait);
                        }
                        Message m = message(topic, body(size, due, i));
                        try {
                            if (sendMode.equals("sync")) {
                                lag[i] = System.nanoTime() - due;
                                p.send(m);
                            } else {
                                if (!window.tryAcquire()) {
                                    windowWaits.incrementAndGet(); // at the bound: wait for an answer
                                    window.acquire();
                                }
                                lag[i] = System.nanoTime() - due;
                                p.send(m, new SendCallback() {
                                    @Override
                                    public void onSuccess(SendResult r) {
                                        window.release();
                                    }

                                    @Override
                                    public void onException(Throwable e) {
                                        window.release();
                                        errors.incrementAndGet();
                                        firstErr.compareAndSet(null, e.toString());
                                    }
                                });
                            }
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            return;
                        } catch (Exception e) {
                            if (sendMode.equals("async")) {
                                window.release();
                            }
                            errors.incrementAndGet();
                            firstErr.compareAndSet(null, e.toString());
                        }
                    }
                }, "e2e-sender-" + k);
                th.start();
                ts.add(th);
            }
            // The timed window starts when message `untimed` is due.
            long timedStart = start + (long) (untimed * interval);
            long pause = timedStart - System.nanoTime();
            if (pause > 0) {
                LockSupport.parkNanos(pause);
            }
            long cpu0 = cpuNanos();
            timedStart = Math.max(timedStart, System.nanoTime());
            for (Thread th : ts) {
                th.join();
            }
            // The last asynchronous sends: wait until every window is whole again.
            for (Semaphore w : windows) {
                if (w.tryAcquire(inflight, 30, TimeUnit.SECONDS)) {
                    w.release(inflight);
                }
            }
            long sendEnd = System.nanoTime();
            long cpu = cpuNanos() - cpu0;
            long wait = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
            while (received.get() < total - errors.get() && System.nanoTime() < wait) {
                Thread.sleep(20);
            }
            List<Long> timed = new ArrayList<>();
            long missing = 0;
            for (int i = untimed; i < total; i++) {
                long v = lat.get(i);
                if (v == 0) {
                    missing++;
                } else {
                    timed.add(v);
                }
            }
            long[] a = timed.stream().mapToLong(Long::longValue).toArray();
            long[] lags = Arrays.copyOfRange(lag, untimed, total);
            Arrays.sort(lags);
            String err = firstErr.get();
            if (missing > 0 && err == null) {
                err = missing + " timed messages not received within 15 s of the last send";
            }
            String extra = String.format(Locale.ROOT,
                    ",\"senders\":%d,\"send\":\"%s\",\"inflight\":%d,\"sendLagP50\":%.3f,\"sendLagP99\":%.3f,"
                            + "\"sendLagMax\":%.3f,\"windowWaits\":%d",
                    senders, sendMode, sendMode.equals("sync") ? 1 : inflight, pct(lags, 0.50), pct(lags, 0.99),
                    pct(lags, 1.0), windowWaits.get());
            report("e2e", "rate=" + rate, total - untimed, missing, sendEnd - timedStart, a, "end-to-end", cpu, err,
                    extra);
            return a.length > 0 ? 0 : 1;
        } finally {
            p.shutdown();
            c.shutdown();
        }
    }

    private static byte[] body(int size, long due, long idx) {
        byte[] b = new byte[size];
        Arrays.fill(b, (byte) 'x');
        ByteBuffer.wrap(b).putLong(0, due).putLong(8, idx);
        return b;
    }

    // ----------------------------------------------------------------- report

    private static double pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))] / 1e6;
    }

    private static void report(String workload, String mode, long msgs, long errors, long elapsedNanos,
            long[] lat, String latencyKind, long cpuNanos, String firstError) {
        report(workload, mode, msgs, errors, elapsedNanos, lat, latencyKind, cpuNanos, firstError, "");
    }

    /** As above, with extra JSON fields (",\"name\":value...") appended. */
    private static void report(String workload, String mode, long msgs, long errors, long elapsedNanos,
            long[] lat, String latencyKind, long cpuNanos, String firstError, String extra) {
        Arrays.sort(lat);
        double secs = elapsedNanos / 1e9;
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT,
                "{\"workload\":\"%s\",\"mode\":\"%s\",\"messages\":%d,\"errors\":%d,\"seconds\":%.3f,"
                        + "\"msgsPerSec\":%.0f,\"latencyKind\":\"%s\",\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,"
                        + "\"max\":%.3f,\"missing\":%d,\"cpuSeconds\":%.3f",
                workload, mode, msgs, errors, secs, secs > 0 ? msgs / secs : 0, latencyKind,
                pct(lat, 0.50), pct(lat, 0.99), pct(lat, 0.999), pct(lat, 1.0),
                workload.equals("e2e") ? errors : 0, cpuNanos / 1e9));
        sb.append(extra);
        if (firstError != null) {
            sb.append(",\"firstError\":\"").append(firstError.replace("\\", "\\\\").replace("\"", "'")
                    .replace('\n', ' ')).append('"');
        }
        sb.append('}');
        System.out.println(sb);
    }
}
