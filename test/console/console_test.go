//go:build browser

package console

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/proccluster"
	"github.com/chromedp/chromedp"
	"go.uber.org/zap"
)

// consoleCluster is a NameServer and one broker of the real binaries, each
// with its admin listener (and so its console) on a free loopback port.
type consoleCluster struct {
	*proccluster.Cluster
	nsConsole     string // http://127.0.0.1:p/console/
	brokerConsole string
}

// startCluster starts a cluster; extra are flags of both daemons (e.g.
// --console=false).
func startCluster(t *testing.T, name string, extra ...string) *consoleCluster {
	t.Helper()
	bin, cleanup, err := proccluster.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	nsPort, err := proccluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	brPort, err := proccluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	h := proccluster.New(proccluster.Options{
		Name: "console-" + name, BinDir: bin,
		NameServerArgs: append([]string{"--admin-listen", fmt.Sprintf("127.0.0.1:%d", nsPort)}, extra...),
		BrokerArgs:     append([]string{"--admin-listen", fmt.Sprintf("127.0.0.1:%d", brPort)}, extra...),
	})
	c, err := h.Start(proccluster.OneGroup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon logs:\n%s", c.Logs(40))
		}
		c.Close(t.Failed())
	})
	return &consoleCluster{Cluster: c,
		nsConsole:     fmt.Sprintf("http://127.0.0.1:%d/console/", nsPort),
		brokerConsole: fmt.Sprintf("http://127.0.0.1:%d/console/", brPort)}
}

func newProducer(t *testing.T, c *consoleCluster) *client.Producer {
	t.Helper()
	p, err := client.NewProducer("console-test-producer", client.WithNameServers(c.NameSrv), client.WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// consumer starts a push consumer of group on topic; handle decides each
// message's outcome.
func consumer(t *testing.T, c *consoleCluster, group, topic string, handle func(*client.MessageExt) client.ConsumeResult,
	opts ...client.ConsumerOption) {
	t.Helper()
	opts = append([]client.ConsumerOption{client.WithNameServers(c.NameSrv), client.WithLogger(zap.NewNop()),
		client.WithConsumeFrom(client.ConsumeFromFirst)}, opts...)
	pc, err := client.NewPushConsumer(group, opts...)
	if err != nil {
		t.Fatal(err)
	}
	err = pc.Subscribe(topic, "*", client.ConcurrentListener(func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			if r := handle(m); r != client.ConsumeSuccess {
				return r
			}
		}
		return client.ConsumeSuccess
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
}

// TestConsole drives every page of the NameServer's console against a
// cluster holding real data, and the actions the issue names.
func TestConsole(t *testing.T) {
	b := newBrowser(t)
	c := startCluster(t, "pages")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const (
		orders  = "console-orders"
		refunds = "console-refunds"
		billing = "console-billing"
		dlqG    = "console-dlq"
	)
	c.CreateTopic(t, orders, 4)
	c.CreateTopic(t, refunds, 2)

	// Orders with keys (some JSON bodies), consumed by billing: a group
	// with members online and committed offsets.
	p := newProducer(t, c)
	var sent = map[string]*client.SendResult{}
	for i := range 24 {
		key := fmt.Sprintf("order-%d", i)
		body := fmt.Sprintf(`{"order":%d,"amount":%d.50,"currency":"EUR"}`, i, 10+i)
		r, err := p.Send(ctx, &client.Message{Topic: orders, Tag: "paid", Keys: []string{key}, Body: []byte(body)})
		if err != nil {
			t.Fatalf("send %s: %v", key, err)
		}
		sent[key] = r
	}
	var billed atomic.Int64
	consumer(t, c, billing, orders, func(*client.MessageExt) client.ConsumeResult { billed.Add(1); return client.ConsumeSuccess })

	// A dead letter: refunds' group is declared with one delivery attempt,
	// its consumer allows no reconsume and fails until accept is set; then
	// the replayed message is consumed.
	if err := c.Admin.CreateSubscriptionGroup(ctx, client.SubscriptionGroupSpec{Name: dlqG, MaxDeliveryAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	var accept atomic.Bool
	consumedAfterReplay := make(chan string, 16)
	consumer(t, c, dlqG, refunds, func(m *client.MessageExt) client.ConsumeResult {
		if !accept.Load() {
			return client.ConsumeRetryLater
		}
		consumedAfterReplay <- string(m.Body)
		return client.ConsumeSuccess
	}, client.WithMaxReconsumeTimes(0))
	refund, err := p.Send(ctx, &client.Message{Topic: refunds, Keys: []string{"refund-1"}, Body: []byte("refund 1 of order-3")})
	if err != nil {
		t.Fatal(err)
	}
	if !proccluster.WaitFor(30*time.Second, func() bool {
		ds, err := c.Admin.DeadLetters(ctx, dlqG, client.DeadLetterQuery{})
		return err == nil && len(ds) == 1
	}) {
		t.Fatalf("no dead letter in %%DLQ%%%s", dlqG)
	}
	if !proccluster.WaitFor(30*time.Second, func() bool { return billed.Load() >= 24 }) {
		t.Fatalf("billing consumed %d of 24", billed.Load())
	}

	// A message for delivery in an hour, and a transaction left undecided
	// (its producer answers every check with Unknown).
	later, err := p.Send(ctx, &client.Message{Topic: orders, Keys: []string{"later-1"}, Body: []byte("in an hour")},
		client.WithDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := client.NewTransactionProducer("console-txn-producer", undecided{}, client.WithNameServers(c.NameSrv),
		client.WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close() })
	txn, err := tp.SendInTransaction(ctx, &client.Message{Topic: orders, Keys: []string{"txn-1"}, Body: []byte("paid in a transaction")}, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Traffic while the pages are open, for the rates and their charts.
	tickCtx, stopTicks := context.WithCancel(ctx)
	var ticks sync.WaitGroup
	ticks.Add(1)
	go func() {
		defer ticks.Done()
		for tickCtx.Err() == nil {
			// Refused while a subtest has taken the broker's write
			// permission away: the traffic is only for the charts.
			_, _ = p.Send(tickCtx, &client.Message{Topic: orders, Tag: "tick", Body: []byte("tick")})
			select {
			case <-tickCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stopTicks(); ticks.Wait() })

	b.load(t, c.nsConsole)

	t.Run("pages", func(t *testing.T) {
		defer b.checkClean(t)
		b.waitText(t, "#who", "nameserver")
		b.route(t, "#/cluster", "#brokers-table", "broker-a", c.Brokers[0].Addr, "MASTER")
		b.waitText(t, "#ns-table", c.NameSrv)
		// The send/pull sparklines need two polls of the runtime counters.
		b.wait(t, "send rate chart", `document.querySelector('#brokers-table svg.spark polyline') !== null`)
		b.screenshot(t, "cluster")

		txt := b.route(t, "#/topics", "#topics-table", orders, refunds)
		if strings.Contains(txt, "%RETRY%") {
			t.Errorf("system topics shown without the toggle:\n%s", txt)
		}
		b.click(t, "#all")
		b.waitText(t, "#topics-table", "%DLQ%"+dlqG)
		b.click(t, "#all")
		b.wait(t, "system topics hidden again", `!document.querySelector('#topics-table').innerText.includes('%DLQ%')`)
		b.typeInto(t, "#filter", "refunds")
		if txt := b.text(t, "#topics-table"); strings.Contains(txt, orders) || !strings.Contains(txt, refunds) {
			t.Errorf("filter refunds shows:\n%s", txt)
		}
		b.typeInto(t, "#filter", "")
		b.screenshot(t, "topics")

		b.route(t, "#/topics/"+orders, "#queues-table", "broker-a")
		rows := eval[int](t, b, `document.querySelectorAll('#queues-table tbody tr').length`)
		if rows != 4 {
			t.Errorf("topic %s shows %d queues, want 4", orders, rows)
		}
		b.screenshot(t, "topic")

		b.route(t, "#/groups", "#groups-table", billing, dlqG)
		b.screenshot(t, "groups")
		b.route(t, "#/groups/"+billing, "#group-queues-table", orders, "broker-a")
		b.wait(t, "total lag shown", `/^[0-9,]+$/.test(document.querySelector('#lag').innerText)`)
		b.wait(t, "a consumer connection or none available", `document.querySelector('#consumers').innerText.trim() !== ''`)
		b.screenshot(t, "group")

		b.route(t, "#/dlq", "#dlq-table", dlqG)
		b.screenshot(t, "dlq")
		b.route(t, "#/delay", "#delay-table", "broker-a")
		b.waitText(t, "#pending-table", txn.TransactionID, orders)
		b.screenshot(t, "delay")

		// An address with user:password@ (a bookmark of a console with ACL
		// on): the app's requests must not carry them in their URLs, which
		// fetch refuses.
		b.load(t, strings.Replace(c.nsConsole, "http://", "http://someone:secret@", 1)+"#/cluster")
		b.waitText(t, "#brokers-table", "broker-a")
		b.load(t, c.nsConsole)
		b.waitText(t, "#who", "nameserver")
	})

	t.Run("message by key", func(t *testing.T) {
		defer b.checkClean(t)
		b.route(t, "#/messages", "#search-form")
		b.run(t, "search by key", evalJS(`document.querySelector('#by').value = 'key'; document.querySelector('#by').dispatchEvent(new Event('change'))`))
		b.fill(t, "#search-form input[name=topic]", orders)
		b.fill(t, "#search-form input[name=key]", "order-7")
		b.click(t, "#search-form button[type=submit]")
		txt := b.waitText(t, "#messages-table", "order-7", sent["order-7"].MsgID)
		if strings.Contains(txt, "order-8") {
			t.Errorf("search for order-7 shows other keys:\n%s", txt)
		}
		b.screenshot(t, "messages")
		b.click(t, "#messages-table a")
		b.waitText(t, "#body-json", `"order": 7`, `"currency": "EUR"`)
		b.waitText(t, "#msg", "order-7", "KEYS", "paid")
		b.waitText(t, "#trace-table", "origin", orders)
		hex := eval[string](t, b, `document.querySelector('#body-hex').textContent`)
		if !strings.HasPrefix(hex, "00000000  7b 22 6f 72") { // {"or
			t.Errorf("hex view starts %q", hex[:min(len(hex), 40)])
		}
		b.screenshot(t, "message")

		// By id, the unique id the send returned.
		b.route(t, "#/messages?id="+sent["order-3"].MsgID+"&topic="+orders, "#messages-table", "order-3")
	})

	t.Run("create topic", func(t *testing.T) {
		defer b.checkClean(t)
		const name = "console-created"
		b.route(t, "#/topics", "#create-topic")
		b.fill(t, "#create-topic input[name=topic]", name)
		b.fill(t, "#create-topic input[name=queues]", "3")
		b.click(t, "#create-topic button[type=submit]")
		b.waitText(t, "#create-topic .msg", "Created")
		b.waitText(t, "#topics-table", name)
		cfgs, err := c.Admin.TopicConfig(ctx, name)
		if err != nil {
			t.Fatalf("topic created from the page, through the SDK: %v", err)
		}
		if len(cfgs) != 1 || cfgs[0].WriteQueues != 3 {
			t.Errorf("topic created from the page: %+v, want 3 queues on broker-a", cfgs)
		}
		// Creating it again is refused, and the banner says why.
		b.click(t, "#create-topic button[type=submit]")
		b.waitText(t, "#banner", "TOPIC_EXIST_ALREADY")
		b.mu.Lock()
		var kept []string
		for _, p := range b.problems { // the 409 and its console line are this check's own
			if !strings.Contains(p, "409") {
				kept = append(kept, p)
			}
		}
		b.problems = kept
		b.mu.Unlock()
		b.click(t, "#banner [data-dismiss]")
		b.wait(t, "banner dismissed", `document.querySelector('#banner').hidden`)
	})

	t.Run("replay a dead letter", func(t *testing.T) {
		defer b.checkClean(t)
		b.route(t, "#/dlq/"+dlqG, "#letters-table", refund.MsgID, refunds)
		b.click(t, "#replay-form button[value=dry]")
		b.waitText(t, "#replay-out", "Dry run done")
		b.waitText(t, "#replay-lines", refund.MsgID, "would replay")
		ds, err := c.Admin.DeadLetters(ctx, dlqG, client.DeadLetterQuery{})
		if err != nil || len(ds) != 1 || ds[0].Replayed != nil {
			t.Fatalf("after the dry run: %v, %+v (want one dead letter, not replayed)", err, ds)
		}
		accept.Store(true)
		b.click(t, "#replay-form button[value=apply]")
		b.waitText(t, "#confirm-text", "Replay")
		b.click(t, "#confirm-ok")
		b.wait(t, "replay finished", `document.querySelector('#replay-out').dataset.final === 'applied'`)
		progress := eval[struct{ Value, Max float64 }](t, b, `({Value: document.querySelector('#replay-progress').value, Max: document.querySelector('#replay-progress').max})`)
		if progress.Value != progress.Max {
			t.Errorf("progress bar at %v of %v after the replay", progress.Value, progress.Max)
		}
		select {
		case body := <-consumedAfterReplay:
			if body != "refund 1 of order-3" {
				t.Errorf("consumed %q after the replay", body)
			}
		case <-time.After(waitLimit):
			t.Fatalf("the replayed dead letter was not consumed in %v", waitLimit)
		}
		b.waitText(t, "#letters-table", "replayed")
		b.screenshot(t, "dlq-group")

		// The export link: every dead letter of the group as NDJSON.
		ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
		defer cancel()
		type download struct{ Type, Disposition, Body string }
		got, err := chromedp.Run(ctx, chromedp.Evaluate[download](`(async () => {
			const r = await fetch(document.querySelector('#export').href);
			return {Type: r.headers.get('Content-Type'), Disposition: r.headers.get('Content-Disposition'), Body: await r.text()};
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(got.Body), "\n")
		if !strings.HasPrefix(got.Type, "application/x-ndjson") || !strings.HasPrefix(got.Disposition, "attachment") ||
			len(lines) != 1 || !strings.Contains(lines[0], refund.MsgID) || !strings.Contains(lines[0], "refund 1 of order-3") {
			t.Errorf("export: %+v, want one NDJSON line with the dead letter as an attachment", got)
		}
	})

	t.Run("cancel a delayed message, commit a transaction", func(t *testing.T) {
		defer b.checkClean(t)
		b.route(t, "#/delay", "#delay-table", "broker-a")
		b.fill(t, "#cancel-form input[name=topic]", orders)
		b.fill(t, "#cancel-form input[name=msgId]", later.MsgID)
		b.click(t, "#cancel-form button[type=submit]")
		b.waitText(t, "#confirm-text", later.MsgID)
		b.click(t, "#confirm-ok")
		b.waitText(t, "#cancel-form .msg", "Cancelled")
		st, err := c.Admin.DelayStatus(ctx, c.Brokers[0].Addr)
		if err != nil {
			t.Fatal(err)
		}
		if st.Timer.Cancelled != 1 {
			t.Errorf("after the cancel from the page the timer counts %d cancelled, want 1", st.Timer.Cancelled)
		}

		b.waitText(t, "#pending-table", txn.TransactionID)
		b.click(t, `#pending-table button[data-commit="1"]`)
		b.waitText(t, "#confirm-text", "Commit")
		b.click(t, "#confirm-ok")
		b.wait(t, "no pending transaction", `document.querySelector('#pending').innerText.includes('No pending transaction')`)
		if !proccluster.WaitFor(waitLimit, func() bool {
			ms, err := c.Admin.QueryMessageByKey(ctx, orders, "txn-1", time.Time{}, time.Time{}, 10)
			return err == nil && len(ms) == 1 && string(ms[0].Body) == "paid in a transaction"
		}) {
			t.Errorf("the transaction committed from the page: its message is not in %s", orders)
		}
	})

	t.Run("operator actions", func(t *testing.T) {
		defer b.checkClean(t)
		operatorActions(t, b, c, refunds)
	})

	t.Run("scale", func(t *testing.T) { scale(t, b, c) })
}

// scale creates 500 topics and 200 groups and measures, in the browser,
// the time from navigation to the topics and groups tables rendered (the
// app's performance marks). The figure is logged for docs/BENCHMARKS.md,
// not asserted.
func scale(t *testing.T, b *browser, c *consoleCluster) {
	defer b.checkClean(t)
	const nTopics, nGroups = 500, 200
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, nTopics+nGroups)
	work := make(chan func() error)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				if err := f(); err != nil {
					errs <- err
				}
			}
		}()
	}
	var slowRoutes atomic.Int64
	for i := range nTopics {
		work <- func() error {
			name := fmt.Sprintf("scale-topic-%03d", i)
			err := c.Admin.CreateTopic(ctx, client.TopicSpec{Name: name, Queues: 4})
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				// Created, but not routed within the SDK's 30 s: hundreds
				// of registrations in a row on a loaded machine (the race
				// detector) can take longer. How long is not this test's
				// subject; that it gets routed is, and a topic never
				// routed fails the test with the route the SDK sees.
				slowRoutes.Add(1)
				wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
				defer wcancel()
				if err = c.WaitRouted(wctx, name); err != nil {
					r, rerr := c.Admin.Route(context.Background(), name)
					err = fmt.Errorf("%w (route now: %+v, %v)", err, r, rerr)
				}
			}
			return err
		}
	}
	for i := range nGroups {
		work <- func() error {
			return c.Admin.CreateSubscriptionGroup(ctx, client.SubscriptionGroupSpec{Name: fmt.Sprintf("scale-group-%03d", i)})
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("created %d topics and %d groups through the SDK in %v (%d topics routed after the SDK's 30 s wait)",
		nTopics, nGroups, time.Since(start).Round(time.Millisecond), slowRoutes.Load())

	for _, tc := range []struct{ page, table, mark, api string }{
		{"#/topics", "#topics-table", "bolide:topics-table", "/console/api/topics"},
		{"#/groups", "#groups-table", "bolide:groups-table", "/console/api/groups"},
	} {
		var times, apis []float64
		for range 3 {
			b.load(t, c.nsConsole+tc.page)
			b.wait(t, tc.mark, fmt.Sprintf(`performance.getEntriesByName(%q).length > 0`, tc.mark))
			ms := eval[float64](t, b, fmt.Sprintf(`performance.getEntriesByName(%q)[0].startTime`, tc.mark))
			times = append(times, ms)
			// The API call's share: its resource timing (request to last byte).
			apis = append(apis, eval[float64](t, b, fmt.Sprintf(
				`performance.getEntriesByType('resource').find(e => new URL(e.name).pathname === %q)?.duration ?? -1`, tc.api)))
		}
		rows := eval[int](t, b, fmt.Sprintf(`document.querySelectorAll('%s tbody tr').length`, tc.table))
		want := nTopics
		if tc.page == "#/groups" {
			want = nGroups
		}
		if rows < want {
			t.Errorf("%s shows %d rows, want at least %d", tc.page, rows, want)
		}
		slices.Sort(times)
		slices.Sort(apis)
		t.Logf("SCALE %s: %d rows rendered %.0f ms after navigation (median of 3: %.0f, %.0f, %.0f ms; the issue's bound is 1000 ms); of which GET %s %.0f ms (median)",
			tc.page, rows, times[1], times[0], times[1], times[2], tc.api, apis[1])
	}
	if os.Getenv("BOLIDE_CONSOLE_SCREENSHOTS") != "" {
		b.load(t, c.nsConsole+"#/topics")
		b.waitText(t, "#topics-table", "scale-topic-499")
		b.screenshot(t, "topics-500")
	}
}

// undecided is a transaction listener that never decides.
type undecided struct{}

func (undecided) ExecuteLocalTransaction(context.Context, *client.Message, any) client.LocalTransactionState {
	return client.Unknown
}

func (undecided) CheckLocalTransaction(context.Context, *client.MessageExt) client.LocalTransactionState {
	return client.Unknown
}

// operatorActions drives the console's other changes, each checked through
// the SDK: a broker's runtime configuration, its write permission, a
// group's settings, a reset of offsets (preview, then apply), a topic's
// update, and a search by time range.
func operatorActions(t *testing.T, b *browser, c *consoleCluster, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := c.Brokers[0].Addr
	configValue := func(key string) string {
		es, err := c.Admin.BrokerConfig(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Key == key {
				return e.Value
			}
		}
		t.Fatalf("broker config has no %s", key)
		return ""
	}

	// A runtime key changed from the broker's configuration view.
	b.route(t, "#/cluster", "#brokers-table", "broker-a")
	b.click(t, `#brokers-table button[data-act="config"]`)
	b.waitText(t, "#cfg-table", "fileReservedTime", "maxMessageSize")
	b.fill(t, `#cfg-table input[name="fileReservedTime"]`, "48")
	b.click(t, "#cfg-sec button[type=submit]")
	b.waitText(t, "#confirm-text", "fileReservedTime")
	b.click(t, "#confirm-ok")
	b.waitText(t, "#cfg-msg", "fileReservedTime=48")
	if v := configValue("fileReservedTime"); v != "48" {
		t.Errorf("fileReservedTime is %s after the change from the page, want 48", v)
	}

	// Write permission taken away and given back.
	writable := func() bool {
		r, err := c.Admin.BrokerRuntime(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		return r.Writable
	}
	b.click(t, `#brokers-table button[data-w="0"]`)
	b.waitText(t, "#confirm-text", "Take write permission away from broker group broker-a")
	b.click(t, "#confirm-ok")
	b.waitText(t, "#brokers-table", "read-only")
	if writable() {
		t.Error("broker-a is still writable after the page took the permission away")
	}
	b.click(t, `#brokers-table button[data-w="1"]`)
	b.waitText(t, "#confirm-text", "Give write permission back")
	b.click(t, "#confirm-ok")
	b.waitText(t, "#brokers-table", "writable")
	if !writable() {
		t.Error("broker-a is not writable after the page gave the permission back")
	}

	// A group with committed offsets and nobody online: reset to the
	// earliest offsets, a preview that changes nothing, then the reset.
	const audit = "console-audit"
	pc, err := client.NewPullConsumer(audit, client.WithNameServers(c.NameSrv), client.WithLogger(zap.NewNop()),
		client.WithConsumeFrom(client.ConsumeFromFirst), client.WithAutoCommit(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe(topic, "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 2; { // the refund and its replay
		ms, err := pc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += len(ms)
	}
	if err := pc.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	sum := func() (n int64) {
		for _, o := range c.GroupOffsets(t, audit, topic) {
			n += max(o, 0)
		}
		return n
	}
	if n := sum(); n != 2 {
		t.Fatalf("%s committed %d, want 2", audit, n)
	}
	b.route(t, "#/groups/"+audit, "#group-queues-table", topic)
	b.wait(t, "reset topic choice", fmt.Sprintf(`document.querySelector('#reset-topic').value === %q`, topic)) // the default
	b.fill(t, "#reset-form input[name=to]", "earliest")
	b.click(t, `#reset-form button[value=preview]`)
	b.waitText(t, "#reset-out", "Preview")
	b.waitText(t, "#reset-table", "broker-a")
	if n := sum(); n != 2 {
		t.Errorf("the preview moved the offsets: %d committed, want 2", n)
	}
	b.click(t, "#reset-apply")
	b.waitText(t, "#confirm-text", "Reset the offsets of "+audit)
	b.click(t, "#confirm-ok")
	b.waitText(t, "#reset-out", "Offsets reset")
	if n := sum(); n != 0 {
		t.Errorf("after the reset to earliest %s has %d committed, want 0", audit, n)
	}

	// The group's settings.
	b.fill(t, "#declare-form input[name=maxDeliveryAttempts]", "5")
	b.fill(t, "#declare-form input[name=retryBackoff]", "1s, 5s")
	b.click(t, "#declare-form button[type=submit]")
	b.waitText(t, "#declare-form .msg", "Saved")
	sg, err := c.Admin.SubscriptionGroup(ctx, audit)
	if err != nil {
		t.Fatal(err)
	}
	if len(sg) != 1 || sg[0].MaxDeliveryAttempts != 5 || len(sg[0].RetryBackoff) != 2 || sg[0].RetryBackoff[1] != 5*time.Second {
		t.Errorf("group settings saved from the page: %+v, want 5 attempts and backoff 1s 5s", sg)
	}

	// A topic's update from its page.
	b.route(t, "#/topics/console-created", "#queues-table", "broker-a")
	b.wait(t, "update form", `document.querySelector('#update-topic') !== null`)
	b.fill(t, "#update-topic input[name=queues]", "6")
	b.click(t, "#update-topic button[type=submit]")
	b.waitText(t, "#update-topic .msg", "Updated")
	cfgs, err := c.Admin.TopicConfig(ctx, "console-created")
	if err != nil || len(cfgs) != 1 || cfgs[0].WriteQueues != 6 {
		t.Errorf("topic updated from the page: %+v, %v; want 6 queues", cfgs, err)
	}

	// A search by store time: the last hour of the topic.
	b.route(t, "#/messages", "#search-form")
	b.run(t, "search by time", evalJS(`document.querySelector('#by').value = 'time'; document.querySelector('#by').dispatchEvent(new Event('change'))`))
	b.fill(t, "#search-form input[name=topic]", topic)
	b.click(t, "#search-form button[type=submit]")
	b.waitText(t, "#messages-table", "refund-1")
	if n := eval[int](t, b, `document.querySelectorAll('#messages-table tbody tr').length`); n != 2 {
		t.Errorf("the last hour of %s shows %d messages, want 2 (the refund and its replay)", topic, n)
	}
}
