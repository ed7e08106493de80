// Oracle evaluates filter expressions with Apache RocketMQ's own filter
// module, for TestAgainstRocketMQ (see oracle_test.go for how to build it).
//
// Input, one case per line: base64(expression) SPACE base64(properties),
// where properties are key NUL value NUL key NUL value ... (may be empty).
// Output, one line per case: "parse-error", or "match" / "no-match" the way
// RocketMQ's broker decides (ExpressionMessageFilter: TRUE matches; FALSE,
// null and any exception do not).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;

import org.apache.rocketmq.filter.expression.EvaluationContext;
import org.apache.rocketmq.filter.expression.Expression;
import org.apache.rocketmq.filter.parser.SelectorParser;

public class Oracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        Base64.Decoder dec = Base64.getDecoder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", -1);
            String expr = new String(dec.decode(parts[0]), StandardCharsets.UTF_8);
            String raw = parts.length > 1 ? new String(dec.decode(parts[1]), StandardCharsets.UTF_8) : "";
            final Map<String, Object> props = new HashMap<>();
            if (!raw.isEmpty()) {
                String[] kv = raw.split("\0", -1);
                for (int i = 0; i + 1 < kv.length; i += 2) {
                    props.put(kv[i], kv[i + 1]);
                }
            }
            Expression e;
            try {
                e = SelectorParser.parse(expr);
            } catch (Throwable t) {
                out.println("parse-error");
                continue;
            }
            Object r = null;
            try {
                r = e.evaluate(new EvaluationContext() {
                    public Object get(String name) { return props.get(name); }
                    public Map<String, Object> keyValues() { return props; }
                });
            } catch (Throwable t) {
                r = null;
            }
            out.println(r instanceof Boolean && (Boolean) r ? "match" : "no-match");
        }
        out.flush();
    }
}
