package io.bolide.rocketmq5;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A real Bolide cluster for the tests: one NameServer and one broker (broker-a, a master) started
 * from prebuilt binaries on ports the kernel picks on 127.0.0.1, with data in a temporary directory
 * (the same way as test/rocketmq-java's cluster). Topics and groups are made with the bolide CLI.
 *
 * <p>The binaries come from the system property {@code bolideBin}, else the environment variable
 * {@code BOLIDE_BIN}, else {@code ../../bin}. The RocketMQ 5 clients' access point is the
 * NameServer's address; the environment variable {@code BOLIDE_V5_ACCESS=broker} makes it the
 * broker's. {@link #close()} sends SIGTERM to the broker, then to the NameServer, copies their logs
 * to the directory in {@code bolideLogDir} and removes the data unless {@code bolideKeep} is set.
 *
 * <p>Started with an {@link Acl}, both daemons run with access control on ({@code --acl --acl-file}),
 * the broker signs its calls to the NameServer with the Acl's keys (an admin user of the file), and
 * so does the CLI ({@code BOLIDE_ACCESS_KEY}, {@code BOLIDE_SECRET_KEY}).
 */
public final class BolideCluster implements AutoCloseable {

    /** Short delays and a quick transaction check-back, so that the tests take seconds. */
    private static final String DELAY_LEVELS = "1s 3s 1s 1s 1s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s";

    private static final Duration START_TIMEOUT = Duration.ofSeconds(60);

    private static Boolean topicTypes;
    private static Boolean groupCreate;

    private final Path bin;
    private final Path work;
    private final String label;
    private final List<Process> processes = new ArrayList<>();
    private Process nameserver;
    private Process broker;
    private String namesrvAddr;
    private String brokerAddr;
    private boolean closed;
    private final Acl acl;

    /** Access control of a cluster: the ACL file and the admin user the broker and the CLI sign with. */
    public record Acl(Path file, String accessKey, String secretKey) {
    }

    private BolideCluster(Path bin, Path work, String label, Acl acl) {
        this.bin = bin;
        this.work = work;
        this.label = label;
        this.acl = acl;
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

    /** Starts a NameServer and a broker and returns once the broker serves routes. */
    public static BolideCluster start(String label) {
        return start(label, null);
    }

    /** Starts a NameServer and a broker with access control on (acl null: off). */
    public static BolideCluster start(String label, Acl acl) {
        Path bin = binDir();
        for (String b : List.of("bolide", "bolide-nameserver", "bolide-broker")) {
            if (!Files.isExecutable(bin.resolve(b))) {
                throw new IllegalStateException(bin.resolve(b) + " is missing: build the binaries first "
                        + "(go build -o DIR ./cmd/...) and pass -DbolideBin=DIR or BOLIDE_BIN=DIR");
            }
        }
        Path work;
        try {
            work = Files.createTempDirectory("bolide-java5-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        BolideCluster c = new BolideCluster(bin, work, label, acl);
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
        String level = System.getProperty("bolideLogLevel", "info");
        Path nsAddrFile = work.resolve("namesrv.addr");
        List<String> ns = new ArrayList<>(List.of(
                bin.resolve("bolide-nameserver").toString(),
                "--listen", "127.0.0.1:0",
                "--addr-file", nsAddrFile.toString(),
                "--gossip", "off",
                "--admin-listen", "127.0.0.1:0",
                "--log-level", level));
        if (acl != null) {
            ns.addAll(List.of("--acl", "--acl-file", acl.file().toString()));
        }
        nameserver = spawn("namesrv.log", ns.toArray(String[]::new));
        namesrvAddr = waitForFile(nsAddrFile, nameserver, "NameServer");

        Path addrFile = work.resolve("broker-a.addr");
        List<String> br = new ArrayList<>(List.of(
                bin.resolve("bolide-broker").toString(),
                "--namesrv", namesrvAddr,
                "--listen", "127.0.0.1:0",
                "--addr-file", addrFile.toString(),
                "--store-dir", work.resolve("broker-a").toString(),
                "--broker-name", "broker-a",
                "--broker-id", "0",
                "--cluster", "DefaultCluster",
                "--segment-size", String.valueOf(16 << 20),
                "--gossip", "off",
                "--ha-listen", "127.0.0.1:0",
                "--admin-listen", "127.0.0.1:0",
                "--register-interval", "5s",
                "--delay-levels", DELAY_LEVELS,
                "--transaction-timeout", "1s",
                "--transaction-check-interval", "1s",
                "--log-level", level));
        if (acl != null) {
            br.addAll(List.of("--acl", "--acl-file", acl.file().toString(),
                    "--access-key", acl.accessKey(), "--secret-key", acl.secretKey()));
        }
        broker = spawn("broker-a.log", br.toArray(String[]::new));
        brokerAddr = waitForFile(addrFile, broker, "broker-a");

        // Ready once the NameServer lists the broker and routes a topic created on it.
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        String last = "";
        while (System.nanoTime() < deadline) {
            CliResult list = cli(Duration.ofSeconds(15), "cluster", "list", "-o", "json");
            if (list.exitCode == 0 && list.output.contains("\"role\":\"MASTER\"")) {
                CliResult r = cli(Duration.ofSeconds(15), "topic", "create", "bolide-java5-ready", "--queues", "1");
                if (r.exitCode == 0) {
                    return;
                }
                last = r.output;
            } else {
                last = list.output;
            }
            checkAlive(broker, "broker-a");
            sleep(200);
        }
        throw new IllegalStateException("the broker did not become ready within " + START_TIMEOUT + ": " + last);
    }

    /** The endpoints string the RocketMQ 5 clients take (their access point). */
    public String accessPoint() {
        return "broker".equals(System.getenv("BOLIDE_V5_ACCESS")) ? brokerAddr : namesrvAddr;
    }

    /** host:port of the NameServer. */
    public String namesrvAddr() {
        return namesrvAddr;
    }

    /**
     * Creates a topic with {@code queues} queues and RocketMQ 5 message type {@code type} (NORMAL,
     * FIFO, DELAY, TRANSACTION; null: MIXED). Without topic types in the CLI the topic is created
     * without one (MIXED: it accepts every type).
     */
    public void createTopic(String topic, int queues, String type) {
        List<String> args = new ArrayList<>(List.of("topic", "create", topic, "--queues", String.valueOf(queues)));
        if (type != null && topicTypes()) {
            args.add("--type");
            args.add(type);
        }
        mustCli(args.toArray(new String[0]));
    }

    /**
     * Creates a FIFO subscription group; false (and nothing created) when the CLI cannot create
     * groups yet.
     */
    public boolean createFifoGroup(String group) {
        if (!groupCreate()) {
            return false;
        }
        mustCli("group", "create", group, "--fifo");
        return true;
    }

    /**
     * Creates a subscription group with at most {@code attempts} deliveries of a message; false
     * (and nothing created) when the CLI cannot create groups yet.
     */
    public boolean createGroupWithMaxAttempts(String group, int attempts) {
        if (!groupCreate()) {
            return false;
        }
        mustCli("group", "create", group, "--max-delivery-attempts", String.valueOf(attempts));
        return true;
    }

    private synchronized boolean topicTypes() {
        if (topicTypes == null) {
            topicTypes = cli(Duration.ofSeconds(15), "topic", "create", "--help").output.contains("--type");
        }
        return topicTypes;
    }

    private synchronized boolean groupCreate() {
        if (groupCreate == null) {
            groupCreate = Pattern.compile("(?m)^\\s+create\\s").matcher(cli(Duration.ofSeconds(15), "group", "--help").output).find();
        }
        return groupCreate;
    }

    /** The group's total lag on a topic ({@code bolide group lag}), or -1 when none is reported. */
    public long groupLag(String group, String topic) {
        CliResult r = cli(Duration.ofSeconds(15), "group", "lag", group, "--topic", topic, "-o", "json");
        if (r.exitCode != 0 || !r.output.contains("\"queues\":[{")) {
            return -1;
        }
        Matcher m = Pattern.compile("\"totalLag\":(-?\\d+)").matcher(r.output);
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }

    /**
     * A message of a topic by its id (the unique id, UNIQ_KEY) from the key index ({@code bolide msg
     * query --topic TOPIC --key ID -o json}): its JSON line, or null when not found.
     */
    public String getMessage(String topic, String id) {
        CliResult r = cli(Duration.ofSeconds(15), "msg", "query", "--topic", topic, "--key", id, "-o", "json");
        if (r.exitCode != 0) {
            return null;
        }
        return r.output.lines().filter(l -> l.startsWith("{") && l.contains("\"msgId\":\"" + id + "\""))
                .findFirst().orElse(null);
    }

    /**
     * Consumes {@code count} messages of a topic with Bolide's own consumer ({@code bolide consume})
     * as {@code group}; returns the JSON lines (fewer when nothing new comes for 30 s).
     */
    public List<String> consume(String topic, String group, int count) {
        CliResult r = cli(Duration.ofSeconds(120), "consume", "--topic", topic, "--group", group,
                "--count", String.valueOf(count), "--timeout", "30s", "-o", "json");
        if (r.exitCode != 0) {
            throw new IllegalStateException("bolide consume " + topic + " failed (" + r.exitCode + "): " + r.output);
        }
        return r.output.lines().filter(l -> l.startsWith("{")).toList();
    }

    /** The value of a string field of a JSON line (no escapes handled: the tests' values have none). */
    public static String jsonField(String json, String field) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(field) + "\":\"([^\"]*)\"").matcher(json);
        return m.find() ? m.group(1) : null;
    }

    /** The value of a number field of a JSON line, or -1. */
    public static long jsonNumber(String json, String field) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(field) + "\":(-?\\d+)").matcher(json);
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }

    /** The result of one run of the bolide CLI: exit code and stdout+stderr. */
    public record CliResult(int exitCode, String output) {
    }

    /** Runs {@code bolide -n <namesrv> args...} and fails when it fails. */
    public String mustCli(String... args) {
        CliResult r = cli(Duration.ofSeconds(30), args);
        if (r.exitCode != 0) {
            throw new IllegalStateException("bolide " + String.join(" ", args) + " failed (" + r.exitCode + "): " + r.output);
        }
        return r.output;
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
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(out.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
            if (acl != null) {
                pb.environment().put("BOLIDE_ACCESS_KEY", acl.accessKey());
                pb.environment().put("BOLIDE_SECRET_KEY", acl.secretKey());
            }
            Process p = pb.start();
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
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(work.resolve(logName).toFile()))
                    .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
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

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** Prints the last lines of each daemon's log on stderr. */
    public void dumpLogs() {
        for (String log : List.of("namesrv.log", "broker-a.log")) {
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

    /** Stops the broker, then the NameServer (SIGTERM, then SIGKILL after 20 s), and removes the data. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (broker != null) {
            stop(broker);
        }
        if (nameserver != null) {
            stop(nameserver);
        }
        for (Process p : processes) {
            stop(p);
        }
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

    private void copyLogs() {
        String dir = System.getProperty("bolideLogDir");
        if (dir == null || dir.isBlank()) {
            return;
        }
        try {
            Path to = Files.createDirectories(Paths.get(dir));
            for (String log : List.of("namesrv.log", "broker-a.log")) {
                Path f = work.resolve(log);
                if (Files.exists(f)) {
                    Files.copy(f, to.resolve(label + "-" + log), StandardCopyOption.REPLACE_EXISTING);
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
