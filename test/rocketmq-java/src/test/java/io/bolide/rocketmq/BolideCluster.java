package io.bolide.rocketmq;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real Bolide cluster for the tests: one NameServer and one or more broker groups (broker-a,
 * broker-b, ...: a master each) started from prebuilt binaries, on ports the kernel picks on
 * 127.0.0.1, with data in a temporary directory.
 *
 * <p>The binaries come from the system property {@code bolideBin}, else the environment variable
 * {@code BOLIDE_BIN}, else {@code ../../bin} (the repository's {@code bin/} seen from this module).
 * The brokers run with short delay levels, a transaction check-back after one second and small
 * CommitLog segments, so that the tests take seconds (see {@link #DELAY_LEVELS}).
 *
 * <p>{@link #close()} sends SIGTERM to the brokers, then to the NameServer, and removes the data
 * unless the system property {@code bolideKeep} is set ({@code bolideLogLevel} sets the daemons'
 * log level: debug shows every request code a front end does not serve). The daemons' logs are in
 * {@code <work>/broker-a.log}, ... and {@code <work>/namesrv.log}; a failed start prints their tails.
 */
public final class BolideCluster implements AutoCloseable {

    /**
     * The broker's delay levels 1..18. Level 1 and 2 are what {@code DelayTest} checks; the
     * retry levels a failed message takes (3 + reconsumeTimes) are kept short so that a message
     * reaches the dead-letter queue after two retries within seconds.
     */
    public static final String DELAY_LEVELS = "1s 3s 1s 1s 1s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s";

    /** Seconds of delay level {@code level} (1-based), as configured above. */
    public static long delayLevelSeconds(int level) {
        String s = DELAY_LEVELS.split(" ")[level - 1];
        return Long.parseLong(s.substring(0, s.length() - 1));
    }

    /** How long the broker waits before the first check-back of an undecided half message. */
    public static final Duration TRANSACTION_TIMEOUT = Duration.ofSeconds(1);

    private static final Duration START_TIMEOUT = Duration.ofSeconds(60);

    private final Path bin;
    private final Path work;
    private final int groups;
    private final List<Process> processes = new ArrayList<>();
    private final List<Process> brokers = new ArrayList<>();
    private final java.util.Map<String, String> brokerAddrs = new java.util.LinkedHashMap<>();
    private Process nameserver;
    private String namesrvAddr;
    private boolean closed;

    private BolideCluster(Path bin, Path work, int groups) {
        this.bin = bin;
        this.work = work;
        this.groups = groups;
    }

    /** The name of broker group i (0-based): broker-a, broker-b, ... */
    public static String brokerName(int i) {
        return "broker-" + (char) ('a' + i);
    }

    /** The directory of bolide, bolide-nameserver and bolide-broker. */
    public static Path binDir() {
        String dir = System.getProperty("bolideBin");
        if (dir == null || dir.isBlank()) {
            dir = System.getenv("BOLIDE_BIN");
        }
        if (dir == null || dir.isBlank()) {
            dir = "../../bin";
        }
        return Paths.get(dir).toAbsolutePath().normalize();
    }

    /** Starts a NameServer and one broker and waits until the broker serves routes. */
    public static BolideCluster start() {
        return start(1);
    }

    /** Starts a NameServer and {@code groups} broker groups and waits until every one serves routes. */
    public static BolideCluster start(int groups) {
        Path bin = binDir();
        for (String b : List.of("bolide", "bolide-nameserver", "bolide-broker")) {
            if (!Files.isExecutable(bin.resolve(b))) {
                throw new IllegalStateException(bin.resolve(b) + " is missing: build the binaries first "
                        + "(go build -o DIR ./cmd/...) and pass -DbolideBin=DIR or BOLIDE_BIN=DIR");
            }
        }
        Path work;
        try {
            work = Files.createTempDirectory("bolide-java-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        BolideCluster c = new BolideCluster(bin, work, groups);
        // The daemons must not outlive the test JVM (Ctrl-C, a surefire timeout that stops it cleanly).
        Runtime.getRuntime().addShutdownHook(new Thread(c::close, "bolide-cluster-stop"));
        try {
            c.startDaemons();
        } catch (RuntimeException | Error e) {
            c.dumpLogs();
            c.close();
            throw e;
        }
        return c;
    }

    private void startDaemons() {
        Path nsAddrFile = work.resolve("namesrv.addr");
        nameserver = spawn("namesrv.log",
                bin.resolve("bolide-nameserver").toString(),
                "--listen", "127.0.0.1:0",
                "--addr-file", nsAddrFile.toString(),
                "--gossip", "off",
                "--admin-listen", "127.0.0.1:0",
                "--log-level", System.getProperty("bolideLogLevel", "info"));
        namesrvAddr = waitForFile(nsAddrFile, nameserver, "NameServer");

        for (int i = 0; i < groups; i++) {
            String name = brokerName(i);
            Path addrFile = work.resolve(name + ".addr");
            Process b = spawn(name + ".log",
                    bin.resolve("bolide-broker").toString(),
                    "--namesrv", namesrvAddr,
                    "--listen", "127.0.0.1:0",
                    "--addr-file", addrFile.toString(),
                    "--store-dir", work.resolve(name).toString(),
                    "--broker-name", name,
                    "--broker-id", "0",
                    "--cluster", "DefaultCluster",
                    "--segment-size", String.valueOf(16 << 20),
                    "--gossip", "off",
                    "--ha-listen", "127.0.0.1:0",
                    "--admin-listen", "127.0.0.1:0",
                    "--register-interval", "5s",
                    "--delay-levels", DELAY_LEVELS,
                    "--transaction-timeout", TRANSACTION_TIMEOUT.toSeconds() + "s",
                    "--transaction-check-interval", "1s",
                    "--log-level", System.getProperty("bolideLogLevel", "info"));
            brokers.add(b);
            brokerAddrs.put(name, waitForFile(addrFile, b, name));
        }

        // The brokers are ready for clients once the NameServer lists every one and routes a topic
        // created on all of them (creating one returns only then).
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        String last = "";
        while (System.nanoTime() < deadline) {
            CliResult list = cli(Duration.ofSeconds(15), "cluster", "list", "-o", "json");
            long masters = list.output.lines().filter(l -> l.contains("\"role\":\"MASTER\"")).count();
            if (list.exitCode == 0 && masters == groups) {
                CliResult r = cli(Duration.ofSeconds(15), "topic", "create", "bolide-java-ready", "--queues", "1");
                if (r.exitCode == 0) {
                    return;
                }
                last = r.output;
            } else {
                last = list.output;
            }
            for (int i = 0; i < brokers.size(); i++) {
                checkAlive(brokers.get(i), brokerName(i));
            }
            sleep(200);
        }
        throw new IllegalStateException("the brokers did not become ready within " + START_TIMEOUT + ": " + last);
    }

    /** host:port of the NameServer, what {@code setNamesrvAddr} takes. */
    public String namesrvAddr() {
        return namesrvAddr;
    }

    /** host:port broker-a listens on (and registers). */
    public String brokerAddr() {
        return brokerAddrs.get(brokerName(0));
    }

    /** Broker group name → the host:port its master listens on, in order (broker-a first). */
    public java.util.Map<String, String> brokerAddrs() {
        return java.util.Collections.unmodifiableMap(brokerAddrs);
    }

    /** How many broker groups the cluster has. */
    public int brokerGroups() {
        return groups;
    }

    /** The temporary directory that holds the stores and the logs. */
    public Path workDir() {
        return work;
    }

    /** Creates a topic with {@code queues} read and write queues and waits until it is routed. */
    public void createTopic(String topic, int queues) {
        createTopic(topic, queues, false);
    }

    /** Creates a topic; {@code order} marks it ordered. Fails the test when the CLI fails. */
    public void createTopic(String topic, int queues, boolean order) {
        List<String> args = new ArrayList<>(List.of("topic", "create", topic, "--queues", String.valueOf(queues)));
        if (order) {
            args.add("--order");
        }
        CliResult r = cli(Duration.ofSeconds(30), args.toArray(new String[0]));
        if (r.exitCode != 0) {
            throw new IllegalStateException("bolide topic create " + topic + " failed (" + r.exitCode + "): " + r.output);
        }
    }

    /** The result of one run of the bolide CLI: exit code and stdout+stderr. */
    public record CliResult(int exitCode, String output) {
    }

    /** Runs {@code bolide -n <namesrv> args...}; the exit code is -1 when it timed out. */
    public CliResult cli(Duration timeout, String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(bin.resolve("bolide").toString());
        cmd.add("-n");
        cmd.add(namesrvAddr);
        cmd.addAll(List.of(args));
        try {
            Path out = Files.createTempFile(work, "cli-", ".out");
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(out.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
            boolean done = p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
            if (!done) {
                p.destroyForcibly().waitFor();
            }
            String text = Files.readString(out, StandardCharsets.UTF_8);
            Files.deleteIfExists(out);
            return new CliResult(done ? p.exitValue() : -1, text);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private Process spawn(String logName, String... cmd) {
        try {
            Process p = new ProcessBuilder(cmd)
                    .redirectErrorStream(true)
                    .redirectOutput(work.resolve(logName).toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                    .start();
            processes.add(p);
            return p;
        } catch (IOException e) {
            throw new UncheckedIOException("starting " + cmd[0], e);
        }
    }

    private String waitForFile(Path file, Process p, String name) {
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        while (System.nanoTime() < deadline) {
            try {
                if (Files.exists(file)) {
                    String s = Files.readString(file, StandardCharsets.UTF_8).trim();
                    if (!s.isEmpty()) {
                        return s;
                    }
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            checkAlive(p, name);
            sleep(50);
        }
        throw new IllegalStateException("the " + name + " did not write " + file + " within " + START_TIMEOUT);
    }

    private static void checkAlive(Process p, String name) {
        if (!p.isAlive()) {
            throw new IllegalStateException("the " + name + " exited with status " + p.exitValue() + " before serving");
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** Prints the last lines of each daemon's log on stderr. */
    public void dumpLogs() {
        for (String log : logNames()) {
            Path f = work.resolve(log);
            if (!Files.exists(f)) {
                continue;
            }
            try {
                List<String> lines = Files.readAllLines(f, StandardCharsets.UTF_8);
                System.err.println("---- " + f + " (last 40 lines)");
                lines.subList(Math.max(0, lines.size() - 40), lines.size()).forEach(System.err::println);
            } catch (IOException e) {
                System.err.println("---- " + f + ": " + e);
            }
        }
    }

    /** Stops the brokers, then the NameServer (SIGTERM, then SIGKILL after 20 s), and removes the data. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        stopDaemons();
        copyLogs();
        if (System.getProperty("bolideKeep") != null) {
            System.err.println("bolide: data and logs kept in " + work);
            return;
        }
        try (Stream<Path> walk = Files.walk(work)) {
            walk.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        } catch (IOException e) {
            System.err.println("bolide: removing " + work + ": " + e);
        }
    }

    private List<String> logNames() {
        List<String> names = new ArrayList<>(List.of("namesrv.log"));
        for (int i = 0; i < groups; i++) {
            names.add(brokerName(i) + ".log");
        }
        return names;
    }

    /** Stops the brokers, then the NameServer, then anything else started; idempotent. */
    private synchronized void stopDaemons() {
        for (Process p : brokers) {
            stop(p);
        }
        if (nameserver != null) {
            stop(nameserver);
        }
        for (Process p : processes) {
            stop(p);
        }
    }

    /** Copies the daemons' logs to the directory in the system property bolideLogDir, if set. */
    private void copyLogs() {
        String dir = System.getProperty("bolideLogDir");
        if (dir == null || dir.isBlank()) {
            return;
        }
        try {
            Path to = Files.createDirectories(Paths.get(dir));
            String prefix = groups == 1 ? "" : groups + "-groups-";
            for (String log : logNames()) {
                Path f = work.resolve(log);
                if (Files.exists(f)) {
                    Files.copy(f, to.resolve(prefix + log), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                }
            }
        } catch (IOException e) {
            System.err.println("bolide: copying the logs to " + dir + ": " + e);
        }
    }

    private static void stop(Process p) {
        if (!p.isAlive()) {
            return;
        }
        p.destroy();
        try {
            if (!p.waitFor(20, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
