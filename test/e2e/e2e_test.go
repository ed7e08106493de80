//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/freeport"
	"github.com/bolide-mq/bolide/internal/testutil"
)

const (
	topic  = "e2e-orders"
	group  = "e2e-billing"
	half   = 5000 // messages per batch; two batches
	queues = 8    // per broker group: 16 in all
)

// sent is what the test sent: one message.
type sent struct {
	n           int // 1..2*half, in sending order
	msgID       string
	offsetMsgID string
	broker      string
	queue       int64
	offset      int64
	body        string
	tag         string
	keys        []string
	props       map[string]string
}

// TestEndToEnd runs the whole story on one cluster, step by step; a failed
// step ends the test (later steps depend on it).
func TestEndToEnd(t *testing.T) {
	began := time.Now()
	c := startCluster(t)
	step := func(name string) func() {
		start := time.Now()
		return func() { t.Logf("step %-40s %v", name, time.Since(start).Round(time.Millisecond)) }
	}

	done := step("cluster list")
	brokers := c.okJSON("cluster", "list")
	if len(brokers) != 2 || str(brokers[0], "broker") != "broker-a" || str(brokers[1], "broker") != "broker-b" ||
		str(brokers[0], "role") != "MASTER" || str(brokers[0], "error") != "" {
		t.Fatalf("cluster list: %v", brokers)
	}
	if r := c.ok("cluster", "list"); !strings.Contains(r.stdout, "broker-a") || !strings.Contains(r.stdout, "MASTER") {
		t.Fatalf("cluster list table: %v", r)
	}
	done()

	done = step("topic create/list/route")
	created := c.okJSON("topic", "create", topic, "--queues", fmt.Sprint(queues))
	if len(created) != 1 || !slices.Equal(strs(created[0], "brokers"), []string{"broker-a", "broker-b"}) ||
		num(t, created[0], "queues") != queues {
		t.Fatalf("topic create: %v", created)
	}
	checkFails(t, c.run("topic", "create", topic), 1, "already exists")
	found := false
	for _, l := range c.okJSON("topic", "list") {
		if str(l, "topic") == topic && str(l, "type") == "normal" {
			found = true
		}
	}
	if !found {
		t.Fatalf("topic list lacks %s", topic)
	}
	if routes := c.okJSON("topic", "route", topic); len(routes) != 2 || num(t, routes[0], "writeQueues") != queues {
		t.Fatalf("topic route: %v", routes)
	}
	done()

	// Two consumers of one group, started before the messages exist so
	// that the queues are shared out before anything is consumed.
	done = step("two consumers share the queues")
	consumeArgs := []string{"consume", "--topic", topic, "--group", group, "-o", "json", "--timeout", "2m", "-v"}
	ca, cb := c.start(consumeArgs...), c.start(consumeArgs...)
	testutil.Eventually(t, 60*time.Second, "both consumers to hold 8 of the 16 queues", func() bool {
		qa, qb := ca.assignment(), cb.assignment()
		if len(qa) != queues || len(qb) != queues {
			return false
		}
		all := append(slices.Clone(qa), qb...)
		slices.Sort(all)
		return len(slices.Compact(all)) == 2*queues
	})
	t.Logf("consumer A holds %v, B holds %v", ca.assignment(), cb.assignment())
	done()

	done = step(fmt.Sprintf("send %d messages", 2*half))
	var msgs []*sent
	// Batch 1: one message per stdin line, sent as they are.
	var stdin strings.Builder
	for i := 1; i <= half; i++ {
		body := fmt.Sprintf(`α-%05d {"n":%d} "quoted" \ back-slash ✓ {{Count}}`, i, i)
		stdin.WriteString(body + "\n")
		if i%1000 == 0 {
			stdin.WriteString("\n") // empty lines are skipped
		}
		msgs = append(msgs, &sent{n: i, body: body, tag: "alpha", keys: []string{fmt.Sprintf("k-%d", i)}})
	}
	r := c.runIn(stdin.String(), "send", "--topic", topic, "--tag", "alpha", "--keys", "k-{{Count}}", "-o", "json", "-")
	if r.code != 0 {
		t.Fatalf("send from stdin: %v", r)
	}
	recordSent(t, r, msgs[:half])
	// Batch 2: --count with templates.
	for i := 1; i <= half; i++ {
		msgs = append(msgs, &sent{n: half + i, body: fmt.Sprintf("β-%d body", i), tag: "beta",
			keys: []string{fmt.Sprintf("k2-%d", i), "shared"}, props: map[string]string{"n": fmt.Sprint(i), "src": "e2e"}})
	}
	r = c.run("send", "--topic", topic, "--tag", "beta", "--keys", "k2-{{Count}},shared", "--property", "n={{Count}}",
		"--property", "src=e2e", "--count", fmt.Sprint(half), "-o", "json", "β-{{Count}} body")
	if r.code != 0 {
		t.Fatalf("send --count: %v", r)
	}
	recordSent(t, r, msgs[half:])
	byUniq := make(map[string]*sent, len(msgs))
	for _, m := range msgs {
		if byUniq[m.msgID] != nil {
			t.Fatalf("two sends returned msg id %s", m.msgID)
		}
		byUniq[m.msgID] = m
	}
	done()

	done = step("consume them all, then Ctrl-C")
	testutil.Eventually(t, 60*time.Second, "the group's lag to reach 0", func() bool {
		r := c.run("group", "lag", group, "-o", "json")
		return r.code == 0 && strings.Contains(r.stdout, `"totalLag":0,`)
	})
	ra, rb := ca.stop(t), cb.stop(t)
	for _, r := range []result{ra, rb} {
		if r.code != 0 {
			t.Fatalf("consumer exit: %v", r)
		}
		checkJSONLines(t, r)
	}
	gotA, gotB := decodeLines(t, ra.stdout), decodeLines(t, rb.stdout)
	if len(gotA) == 0 || len(gotB) == 0 {
		t.Fatalf("a consumer got nothing: A %d, B %d messages", len(gotA), len(gotB))
	}
	seenA, seenB := checkConsumed(t, "A", gotA, byUniq), checkConsumed(t, "B", gotB, byUniq)
	for u := range seenA {
		if seenB[u] {
			t.Errorf("message %s consumed by both consumers", u)
		}
	}
	if len(seenA)+len(seenB) != len(msgs) {
		t.Fatalf("consumed %d + %d distinct messages, sent %d", len(seenA), len(seenB), len(msgs))
	}
	t.Logf("consumer A got %d messages, B %d: each of the %d exactly once, bodies intact", len(seenA), len(seenB), len(msgs))
	done()

	done = step("group lag 0")
	lag := c.okJSON("group", "lag", group)
	if len(lag) != 1 || num(t, lag[0], "totalLag") != 0 {
		t.Fatalf("group lag: %v", lag)
	}
	qs, _ := lag[0]["queues"].([]any)
	var total int64
	topicQueues, retryQueues := 0, 0
	for _, q := range qs {
		q := q.(map[string]any)
		switch str(q, "topic") {
		case topic:
			topicQueues++
			if num(t, q, "lag") != 0 || num(t, q, "consumerOffset") != num(t, q, "brokerOffset") {
				t.Errorf("queue lag: %v", q)
			}
		case "%RETRY%" + group: // push consumers also consume their retry topic; nothing failed
			retryQueues++
			if num(t, q, "lag") != 0 || num(t, q, "brokerOffset") != 0 {
				t.Errorf("retry queue lag: %v", q)
			}
		default:
			t.Errorf("group lag shows a queue of %q", str(q, "topic"))
		}
		total += num(t, q, "brokerOffset")
	}
	if topicQueues != 2*queues || retryQueues == 0 || total != int64(len(msgs)) {
		t.Fatalf("group lag: %d queues of %s and %d of its retry topic holding %d messages", topicQueues, topic, retryQueues, total)
	}
	if r := c.ok("group", "lag", group); !regexp.MustCompile(`TOTAL +\d+ queues +10000 +10000 +0`).MatchString(r.stdout) {
		t.Errorf("group lag table: %v", r)
	}
	gl := c.okJSON("group", "list")
	if i := slices.IndexFunc(gl, func(m map[string]any) bool { return str(m, "group") == group }); i < 0 {
		t.Errorf("group list lacks %s: %v", group, gl)
	}
	done()

	done = step("msg query, get, at")
	probe := msgs[1233] // k-1234
	q := c.okJSON("msg", "query", "--topic", topic, "--key", "k-1234")
	if len(q) != 1 || str(q[0], "msgId") != probe.msgID || str(q[0], "body") != probe.body {
		t.Fatalf("msg query k-1234: %v, want %+v", q, probe)
	}
	if q := c.okJSON("msg", "query", "--topic", topic, "--key", "shared", "--max", "3", "--since", "1h"); len(q) != 3 {
		t.Fatalf("msg query shared --max 3: %d messages", len(q))
	}
	if r := c.ok("msg", "query", "--topic", topic, "--key", "k-1234", "--begin", "+1h", "-o", "json"); r.stdout != "" {
		t.Fatalf("msg query in the future found %q", r.stdout)
	}
	if r := c.ok("msg", "query", "--topic", topic, "--key", "k2-77"); !strings.Contains(r.stdout, "β-77 body") {
		t.Fatalf("msg query table: %v", r)
	}
	byOffsetID := c.okJSON("msg", "get", probe.offsetMsgID)
	if len(byOffsetID) != 1 || str(byOffsetID[0], "matchedBy") != "offsetMsgId" || str(byOffsetID[0], "msgId") != probe.msgID ||
		str(byOffsetID[0], "body") != probe.body {
		t.Fatalf("msg get %s: %v", probe.offsetMsgID, byOffsetID)
	}
	for _, extra := range [][]string{nil, {"--topic", topic}} {
		byUniqID := c.okJSON(append([]string{"msg", "get", probe.msgID}, extra...)...)
		if len(byUniqID) != 1 || str(byUniqID[0], "matchedBy") != "msgId" || str(byUniqID[0], "offsetMsgId") != probe.offsetMsgID {
			t.Fatalf("msg get %s %v: %v", probe.msgID, extra, byUniqID)
		}
	}
	if r := c.ok("msg", "get", probe.msgID); !strings.Contains(r.stdout, "Matched by:       msg id") ||
		!strings.Contains(r.stdout, probe.body) {
		t.Fatalf("msg get table: %v", r)
	}
	unknownID := probe.msgID[:28] + "FFFF" // another counter value of the same producer
	checkFails(t, c.run("msg", "get", unknownID, "--topic", topic), 1, "no message with id")
	checkFails(t, c.run("msg", "get", unknownID), 1, "no message with id")
	at := c.okJSON("msg", "at", "--topic", topic, "--broker", probe.broker, "--queue", fmt.Sprint(probe.queue),
		"--offset", fmt.Sprint(probe.offset))
	if len(at) != 1 || str(at[0], "msgId") != probe.msgID {
		t.Fatalf("msg at: %v", at)
	}
	checkFails(t, c.run("msg", "at", "--topic", topic, "--queue", "0", "--offset", "0"), 2, "give --broker")
	checkFails(t, c.run("msg", "at", "--topic", topic, "--broker", "broker-a", "--queue", "0", "--offset", "999999"), 1,
		"has no message at offset 999999")
	done()

	done = step("offset reset by time, re-read")
	// The reset time: the store time of one of the messages. The re-read
	// must be exactly the messages stored at or after it.
	var stored []time.Time
	storeOf := map[string]time.Time{}
	for _, m := range append(gotA, gotB...) {
		ts, err := time.Parse(time.RFC3339Nano, str(m, "storeTimestamp"))
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, ts)
		storeOf[str(m, "msgId")] = ts
	}
	slices.SortFunc(stored, func(a, b time.Time) int { return a.Compare(b) })
	// A third of the way in: inside a batch, where several messages share
	// a millisecond, so that "at or after" is tested at a tie.
	at0 := stored[len(stored)/3]
	want := map[string]bool{}
	tie := 0
	for u, ts := range storeOf {
		if !ts.Before(at0) {
			want[u] = true
		}
		if ts.Equal(at0) {
			tie++
		}
	}
	// Refused while a member of the group runs.
	cc := c.start("consume", "--topic", topic, "--group", group, "--timeout", "2m", "-v")
	testutil.Eventually(t, 60*time.Second, "the third consumer to hold the queues", func() bool { return len(cc.assignment()) == 2*queues })
	checkFails(t, c.run("offset", "reset", "--group", group, "--topic", topic, "--to-time", fmt.Sprint(at0.UnixMilli())), 1,
		"running consumer")
	if r := cc.stop(t); r.code != 0 || r.stdout != "" {
		t.Fatalf("idle consumer: %v", r)
	}
	testutil.Eventually(t, 30*time.Second, "the group to have no running member", func() bool {
		for _, g := range c.okJSON("group", "list") {
			if str(g, "group") == group {
				return len(strs(g, "clients")) == 0
			}
		}
		return false
	})
	for _, dry := range []bool{true, false} {
		args := []string{"offset", "reset", "--group", group, "--topic", topic, "--to-time", fmt.Sprint(at0.UnixMilli())}
		if dry {
			args = append(args, "--dry-run")
		}
		res := c.okJSON(args...)
		if len(res) != 1 || res[0]["dryRun"] != dry || str(res[0], "to") != at0.UTC().Format("2006-01-02T15:04:05.000Z") {
			t.Fatalf("offset reset: %v", res)
		}
		var moved int64
		for _, q := range res[0]["queues"].([]any) {
			q := q.(map[string]any)
			moved += num(t, q, "before") - num(t, q, "after")
		}
		if moved != int64(len(want)) {
			t.Fatalf("offset reset (dry run %v) moves back %d messages, want %d", dry, moved, len(want))
		}
		wantLag := int64(0)
		if !dry {
			wantLag = int64(len(want))
		}
		if l := c.okJSON("group", "lag", group); num(t, l[0], "totalLag") != wantLag {
			t.Fatalf("lag after reset (dry run %v): %v, want %d", dry, l[0]["totalLag"], wantLag)
		}
	}
	reread := decodeLines(t, c.ok("consume", "--topic", topic, "--group", group, "-o", "json", "--timeout", "3s").stdout)
	got := checkConsumed(t, "re-read", reread, byUniq)
	if len(got) != len(want) || len(reread) != len(want) {
		t.Fatalf("re-read %d messages (%d distinct) after the reset to %v, want the %d stored at or after it",
			len(reread), len(got), at0, len(want))
	}
	for u := range want {
		if !got[u] {
			t.Fatalf("re-read lacks %s, stored at %v", u, storeOf[u])
		}
	}
	if l := c.okJSON("group", "lag", group); num(t, l[0], "totalLag") != 0 {
		t.Fatalf("lag after the re-read: %v", l)
	}
	t.Logf("reset to %s (%d messages stored in that millisecond): re-read the %d messages stored at or after it",
		at0.UTC().Format(time.RFC3339Nano), tie, len(want))
	done()

	done = step("consume --count continues, --tag, --from last")
	g2 := "e2e-count"
	first := decodeLines(t, c.ok("consume", "--topic", topic, "--group", g2, "--count", "7", "-o", "json").stdout)
	second := decodeLines(t, c.ok("consume", "--topic", topic, "--group", g2, "--count", "5", "-o", "json").stdout)
	if len(first) != 7 || len(second) != 5 {
		t.Fatalf("--count 7 then 5 gave %d and %d messages", len(first), len(second))
	}
	s1, s2 := checkConsumed(t, "count-1", first, byUniq), checkConsumed(t, "count-2", second, byUniq)
	for u := range s2 {
		if s1[u] {
			t.Fatalf("the second consume of %s repeated %s", g2, u)
		}
	}
	if l := c.okJSON("group", "lag", g2); num(t, l[0], "totalLag") != int64(len(msgs)-12) {
		t.Fatalf("lag of %s after 12 messages: %v", g2, l[0]["totalLag"])
	}
	// More than one poll's worth: the surplus of the last poll must not
	// be committed.
	g3 := "e2e-count-big"
	big1 := decodeLines(t, c.ok("consume", "--topic", topic, "--group", g3, "--count", "45", "-o", "json").stdout)
	big2 := decodeLines(t, c.ok("consume", "--topic", topic, "--group", g3, "--count", "70", "-o", "json").stdout)
	if len(big1) != 45 || len(big2) != 70 {
		t.Fatalf("--count 45 then 70 gave %d and %d messages", len(big1), len(big2))
	}
	b1 := checkConsumed(t, "count-45", big1, byUniq)
	for u := range checkConsumed(t, "count-70", big2, byUniq) {
		if b1[u] {
			t.Fatalf("the second consume of %s repeated %s", g3, u)
		}
	}
	if l := c.okJSON("group", "lag", g3); num(t, l[0], "totalLag") != int64(len(msgs)-115) {
		t.Fatalf("lag of %s after 115 messages: %v", g3, l[0]["totalLag"])
	}
	beta := decodeLines(t, c.ok("consume", "--topic", topic, "--group", "e2e-beta", "--tag", "beta", "--count", "20", "-o", "json").stdout)
	if len(beta) != 20 {
		t.Fatalf("--tag beta --count 20: %d messages", len(beta))
	}
	for _, m := range beta {
		if str(m, "tags") != "beta" {
			t.Fatalf("--tag beta delivered %v", m)
		}
	}
	if r := c.ok("consume", "--topic", topic, "--group", "e2e-late", "--from", "last", "--timeout", "1s", "-o", "json"); r.stdout != "" {
		t.Fatalf("--from last on a new group printed %q", truncate(r.stdout, 300))
	}
	if r := c.ok("consume", "--topic", topic, "--group", "e2e-table", "--count", "2"); !strings.HasPrefix(r.stdout, "BROKER") ||
		strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stderr, "consumed 2 messages") {
		t.Fatalf("consume table: %v", r)
	}
	done()

	done = step("topic status, update, delete")
	status := c.okJSON("topic", "status", topic)
	var stored2 int64
	for _, q := range status {
		stored2 += num(t, q, "messages")
		if str(q, "lastStoreTime") == "" {
			t.Errorf("queue without a last store time: %v", q)
		}
	}
	if len(status) != 2*queues || stored2 != int64(len(msgs)) {
		t.Fatalf("topic status: %d queues, %d messages", len(status), stored2)
	}
	scratch := "e2e-scratch"
	c.ok("topic", "create", scratch, "--queues", "2", "--broker", "broker-b")
	if u := c.okJSON("topic", "update", scratch, "--queues", "4"); num(t, u[0], "queues") != 4 ||
		!slices.Equal(strs(u[0], "brokers"), []string{"broker-b"}) || str(u[0], "perm") != "rw" {
		t.Fatalf("topic update: %v", u)
	}
	if u := c.okJSON("topic", "update", scratch, "--perm", "r"); num(t, u[0], "queues") != 4 || str(u[0], "perm") != "r" {
		t.Fatalf("topic update --perm r: %v", u)
	}
	checkFails(t, c.run("send", "--topic", scratch, "x"), 1, "")
	c.ok("topic", "delete", scratch)
	checkFails(t, c.run("topic", "status", scratch), 1, `topic "e2e-scratch" does not exist`)
	done()

	done = step("bench produce and consume")
	c.ok("topic", "create", "e2e-bench", "--queues", "4")
	bp := c.okJSON("bench", "produce", "--topic", "e2e-bench", "--count", "3000", "--producers", "2", "--size", "256")
	if len(bp) != 1 || num(t, bp[0], "messages") != 3000 || num(t, bp[0], "errors") != 0 {
		t.Fatalf("bench produce: %v", bp)
	}
	lat := bp[0]["latencyMs"].(map[string]any)
	if num(t, lat, "count") != 3000 {
		t.Fatalf("bench produce latency: %v", lat)
	}
	ba := c.okJSON("bench", "produce", "--topic", "e2e-bench", "--count", "2000", "--batch", "10", "--async")
	if num(t, ba[0], "messages") != 2000 || num(t, ba[0], "errors") != 0 {
		t.Fatalf("bench produce --batch --async: %v", ba)
	}
	bc := c.okJSON("bench", "consume", "--topic", "e2e-bench")
	if len(bc) != 1 || num(t, bc[0], "messages") < 5000 || str(bc[0], "latencyKind") != "end-to-end" {
		t.Fatalf("bench consume: %v", bc)
	}
	if r := c.ok("bench", "produce", "--topic", "e2e-bench", "--count", "500"); !strings.Contains(r.stdout, "Throughput:") ||
		!strings.Contains(r.stdout, "p99.9") {
		t.Fatalf("bench produce table: %v", r)
	}
	done()

	done = step("errors: bad flag, unknown topic, no NameServer")
	checkErrors(t, c)
	done()

	done = step("every command's --help has an example")
	checkHelp(t, c)
	done()

	t.Logf("end-to-end suite took %v", time.Since(began).Round(time.Millisecond))
}

// recordSent fills msgs from the JSON lines send printed, one per message
// in sending order.
func recordSent(t *testing.T, r result, msgs []*sent) {
	t.Helper()
	lines := decodeLines(t, r.stdout)
	if len(lines) != len(msgs) {
		t.Fatalf("send printed %d lines for %d messages", len(lines), len(msgs))
	}
	for i, l := range lines {
		m := msgs[i]
		m.msgID, m.offsetMsgID, m.broker = str(l, "msgId"), str(l, "offsetMsgId"), str(l, "broker")
		m.queue, m.offset = num(t, l, "queueId"), num(t, l, "queueOffset")
		if m.msgID == "" || m.offsetMsgID == "" || m.broker == "" || str(l, "topic") != topic {
			t.Fatalf("send line %d: %v", i+1, l)
		}
	}
}

// checkConsumed checks consumed messages against what was sent: each one
// known, intact and where send said it was stored, each at most once, and
// in queue order within each queue. It returns the msg ids (unique ids) seen.
func checkConsumed(t *testing.T, who string, got []map[string]any, byUniq map[string]*sent) map[string]bool {
	t.Helper()
	seen := make(map[string]bool, len(got))
	lastOffset := map[string]int64{}
	for _, m := range got {
		u := str(m, "msgId")
		s := byUniq[u]
		switch {
		case s == nil:
			t.Fatalf("%s: consumed a message that was not sent: %v", who, m)
		case seen[u]:
			t.Fatalf("%s: consumed %s twice", who, u)
		case str(m, "body") != s.body || num(t, m, "bodySize") != int64(len(s.body)):
			t.Fatalf("%s: message %d: body %q, sent %q", who, s.n, str(m, "body"), s.body)
		case str(m, "tags") != s.tag || !slices.Equal(strs(m, "keys"), s.keys):
			t.Fatalf("%s: message %d: tag %q keys %q, sent %q %q", who, s.n, str(m, "tags"), strs(m, "keys"), s.tag, s.keys)
		case str(m, "offsetMsgId") != s.offsetMsgID || str(m, "broker") != s.broker || num(t, m, "queueId") != s.queue ||
			num(t, m, "queueOffset") != s.offset || str(m, "topic") != topic:
			t.Fatalf("%s: message %d stored at %v, send said %+v", who, s.n, m, s)
		case num(t, m, "reconsumeTimes") != 0 || str(m, "bornTimestamp") == "" || str(m, "storeTimestamp") == "":
			t.Fatalf("%s: message %d: %v", who, s.n, m)
		}
		props, _ := m["properties"].(map[string]any)
		for k, v := range s.props {
			if props[k] != v {
				t.Fatalf("%s: message %d: properties %v, sent %v", who, s.n, props, s.props)
			}
		}
		seen[u] = true
		q := fmt.Sprintf("%s#%d", s.broker, s.queue)
		if last, ok := lastOffset[q]; ok && s.offset <= last {
			t.Fatalf("%s: queue %s went from offset %d to %d", who, q, last, s.offset)
		}
		lastOffset[q] = s.offset
	}
	return seen
}

func checkErrors(t *testing.T, c *cluster) {
	// Bad flags and arguments: exit 2.
	for _, args := range [][]string{
		{"topic", "list", "--bogus"},
		{"send", "--topic", topic, "--count", "x", "hi"},
		{"consume", "--topic", topic},
		{"nosuchcommand"},
		{"group", "lag"},
	} {
		checkFails(t, c.run(args...), 2, "")
		checkFails(t, c.run(append(args, "-o", "json")...), 2, "")
	}
	checkFails(t, c.run("group", "lag", group, "-o", "yaml"), 2, `-o/--output must be "table" or "json"`)
	// An unknown topic: exit 1, the topic named.
	missing := "e2e-no-such-topic"
	for _, args := range [][]string{
		{"topic", "status", missing},
		{"topic", "route", missing},
		{"topic", "delete", missing},
		{"send", "--topic", missing, "hello"},
		{"consume", "--topic", missing, "--group", group},
		{"msg", "query", "--topic", missing, "--key", "k"},
		{"msg", "at", "--topic", missing, "--queue", "0", "--offset", "0"},
		{"group", "lag", group, "--topic", missing},
		{"offset", "reset", "--group", group, "--topic", missing, "--to-earliest"},
		{"bench", "produce", "--topic", missing, "--count", "1"},
	} {
		for _, extra := range [][]string{nil, {"-o", "json"}} {
			r := c.run(append(args, extra...)...)
			checkFails(t, r, 1, fmt.Sprintf("topic %q does not exist", missing))
			if r.took > 5*time.Second {
				t.Errorf("%v took %v", args, r.took)
			}
		}
	}
	// No NameServer there: exit 1 at once. One that never answers: exit 1
	// after --timeout.
	closed, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"topic", "list"}, {"send", "--topic", topic, "x"}, {"consume", "--topic", topic, "--group", "g"}} {
		r := c.run(append(args, "--namesrv", closed, "-o", "json")...)
		checkFails(t, r, 1, "cannot reach the NameServer at "+closed)
		if r.took > 5*time.Second {
			t.Errorf("%v against a closed port took %v", args, r.took)
		}
	}
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	r := c.run("cluster", "list", "--namesrv", hole.Addr().String(), "--timeout", "1s")
	checkFails(t, r, 1, "did not answer within 1s")
	if r.took > 6*time.Second {
		t.Errorf("a silent NameServer with --timeout 1s took %v", r.took)
	}
	// The second NameServer alone serves too.
	if r := c.ok("topic", "route", topic, "-n", c.nsAddrs[1]); !strings.Contains(r.stdout, "broker-b") {
		t.Errorf("route from the second NameServer: %v", r)
	}
}

var commandsRE = regexp.MustCompile(`(?m)^  (\S+)\s{2,}\S`)

// checkHelp walks the command tree through --help and checks that every
// command has an example.
func checkHelp(t *testing.T, c *cluster) {
	var visit func(path []string)
	n := 0
	visit = func(path []string) {
		n++
		r := c.ok(append(slices.Clone(path), "--help")...)
		if !strings.Contains(r.stdout, "\nExamples:\n  bolide") {
			t.Errorf("bolide %s --help has no example:\n%s", strings.Join(path, " "), r.stdout)
		}
		_, cmds, ok := strings.Cut(r.stdout, "\nAvailable Commands:\n")
		if !ok {
			return
		}
		cmds, _, _ = strings.Cut(cmds, "\n\n")
		for _, m := range commandsRE.FindAllStringSubmatch(cmds+"\n", -1) {
			visit(append(slices.Clone(path), m[1]))
		}
	}
	visit(nil)
	if r := c.ok("--version"); !strings.HasPrefix(r.stdout, "bolide ") {
		t.Errorf("--version: %v", r)
	}
	if r := c.ok("completion", "bash"); !strings.Contains(r.stdout, "bolide") {
		t.Errorf("completion bash: %v", r)
	}
	if n < 20 {
		t.Errorf("walked only %d commands", n)
	}
	t.Logf("%d commands have --help with an example", n)
}
