package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testAssets = fstest.MapFS{
	"index.html": {Data: []byte("<!doctype html><title>Bolide</title><script src=app.js></script>")},
	"app.js":     {Data: []byte(strings.Repeat("console.log('bolide');\n", 100))},
}

// env is a cluster and a console for it behind an httptest server.
type env struct {
	t    testing.TB
	c    *cluster.Cluster
	ns   []string
	con  *Console
	srv  *httptest.Server
	user [2]string // HTTP Basic credentials, if set
}

func startConsole(t testing.TB, c *cluster.Cluster, o Options) *env {
	t.Helper()
	if o.Daemon == "" {
		o.Daemon, o.Name, o.Addr = NameServer, c.NameServerAddrs()[0], c.NameServerAddrs()[0]
		o.NameServers = c.NameServerAddrs()
	}
	if o.Assets == nil {
		o.Assets = testAssets
	}
	con, err := New(o, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(func() {
		srv.Close()
		if err := con.Close(); err != nil {
			t.Errorf("console close: %v", err)
		}
	})
	return &env{t: t, c: c, ns: c.NameServerAddrs(), con: con, srv: srv}
}

// do makes a request; body nil sends none, a mutation carries the
// console's headers unless raw.
func (e *env) do(method, path string, body any, hdr map[string]string) (int, http.Header, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("X-Bolide-Console", "1")
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	if e.user[0] != "" {
		req.SetBasicAuth(e.user[0], e.user[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// api makes an API request and decodes the answer into out (if non-nil),
// failing unless the status is want.
func (e *env) api(method, path string, body any, want int, out any) {
	e.t.Helper()
	code, hdr, b := e.do(method, "/console/api"+path, body, nil)
	if code != want {
		e.t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		e.t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// get is a GET for a poll: a status other than 200 is an error to
// retry, not a failure (a consumer's first heartbeat may not have reached
// the broker yet).
func (e *env) get(path string, out any) error {
	e.t.Helper()
	code, _, b := e.do("GET", "/console/api"+path, nil, nil)
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, code, b)
	}
	return json.Unmarshal(b, out)
}

// apiError expects an error answer with status and code.
func (e *env) apiError(method, path string, body any, hdr map[string]string, status int, code string) string {
	e.t.Helper()
	c, h, b := e.do(method, "/console/api"+path, body, hdr)
	var eb errorBody
	if err := json.Unmarshal(b, &eb); err != nil || c != status || eb.Error.Code != code || h.Get("Content-Type") != "application/json" {
		e.t.Fatalf("%s %s: %d %s (%v), want %d %s", method, path, c, b, err, status, code)
	}
	return eb.Error.Message
}

// with is e reporting to t (a subtest).
func (e *env) with(t testing.TB) *env {
	c := *e
	c.t = t
	return &c
}

func (e *env) admin() *client.Admin {
	a, err := client.NewAdmin(client.WithNameServers(e.ns...))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = a.Close() })
	return a
}

func (e *env) producer() *client.Producer {
	p, err := client.NewProducer("console-test-pg", client.WithNameServers(e.ns...), client.WithRouteRefreshInterval(300*time.Millisecond))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = p.Close() })
	return p
}

func (e *env) consumer(group, topic string, from client.ConsumeFrom, l client.Listener) *client.PushConsumer {
	c, err := client.NewPushConsumer(group, client.WithNameServers(e.ns...), client.WithRouteRefreshInterval(300*time.Millisecond),
		client.WithRebalanceInterval(time.Second), client.WithHeartbeatInterval(500*time.Millisecond),
		client.WithCommitInterval(200*time.Millisecond), client.WithLongPollTimeout(2*time.Second), client.WithConsumeFrom(from))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := c.Subscribe(topic, "*", l); err != nil {
		e.t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestConsoleAPI(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	e := startConsole(t, c, Options{})
	adm := e.admin()
	ctx := context.Background()

	var who whoamiJSON
	e.api("GET", "/whoami", nil, 200, &who)
	if who.Daemon != NameServer || who.ACL || who.User != "" || len(who.NameServers) != 1 || who.NameServers[0] != e.ns[0] {
		t.Fatalf("whoami %+v", who)
	}

	t.Run("cluster", func(t *testing.T) {
		e := e.with(t)
		var cl struct {
			NameServers []string            `json:"nameservers"`
			Clusters    map[string][]string `json:"clusters"`
			Brokers     []struct {
				BrokerName, Addr, Role, Error string
				Alive, Writable               bool
				Runtime                       *struct {
					BrokerPermission int32 `json:"brokerPermission"`
					StartTime        string
				}
				Replication *json.RawMessage
			}
			Controller *json.RawMessage `json:"controller"`
		}
		e.api("GET", "/cluster", nil, 200, &cl)
		if len(cl.Brokers) != 1 || cl.Clusters["DefaultCluster"][0] != "broker-a" || cl.Controller != nil {
			t.Fatalf("cluster %+v", cl)
		}
		b := cl.Brokers[0]
		if b.BrokerName != "broker-a" || b.Addr != c.Broker(0).Addr() || !b.Alive || !b.Writable || b.Role != "MASTER" || b.Replication == nil {
			t.Fatalf("broker %+v", b)
		}
		if b.Runtime == nil || b.Runtime.BrokerPermission != 6 || !strings.HasSuffix(b.Runtime.StartTime, "Z") || b.Error != "" {
			t.Errorf("broker runtime %+v (error %q)", b.Runtime, b.Error)
		}
	})

	const topic = "console-orders"
	t.Run("topics", func(t *testing.T) {
		e := e.with(t)
		var made topicSpecJSON
		e.api("POST", "/topics", map[string]any{"topic": topic, "queues": 4, "messageType": "normal"}, 201, &made)
		if made.Topic != topic || made.Queues != 4 || made.Perm != 6 || made.MessageType != "NORMAL" {
			t.Fatalf("created %+v", made)
		}
		r, err := adm.Route(ctx, topic)
		if err != nil || len(r.Queues) != 1 || r.Queues[0].WriteQueues != 4 {
			t.Fatalf("route of the topic made by the console: %+v %v", r, err)
		}
		e.apiError("POST", "/topics", map[string]any{"topic": topic}, nil, 409, "TOPIC_EXIST_ALREADY")
		e.apiError("POST", "/topics", map[string]any{"topic": "bad topic"}, nil, 400, "ILLEGAL_TOPIC")
		e.apiError("POST", "/topics", map[string]any{"topic": "x", "queues": -1}, nil, 400, "INVALID_PARAMETER")
		e.apiError("POST", "/topics", map[string]any{"topic": "x", "bogus": 1}, nil, 400, "INVALID_PARAMETER")

		var list struct{ Topics []topicJSON }
		e.api("GET", "/topics", nil, 200, &list)
		var found *topicJSON
		for i, tp := range list.Topics {
			if tp.Kind != kindNormal {
				t.Errorf("without all=1: %s (%s)", tp.Topic, tp.Kind)
			}
			if tp.Topic == topic {
				found = &list.Topics[i]
			}
		}
		if found == nil || found.ReadQueues != 4 || found.MessageType != "NORMAL" || len(found.Brokers) != 1 || found.Brokers[0].Broker != "broker-a" {
			t.Fatalf("topics: %+v", list.Topics)
		}
		e.api("GET", "/topics?all=1", nil, 200, &list)
		kinds := map[string]bool{}
		for _, tp := range list.Topics {
			kinds[tp.Kind] = true
		}
		if !kinds[kindSystem] || !kinds[kindNormal] {
			t.Fatalf("all=1 kinds %v", kinds)
		}

		var upd topicSpecJSON
		e.api("PUT", "/topics/"+topic, map[string]any{"queues": 6}, 200, &upd)
		c.WaitFor(10*time.Second, func() error {
			r, err := adm.Route(ctx, topic)
			if err != nil || r.Queues[0].WriteQueues != 6 {
				return fmt.Errorf("route %+v %v", r, err)
			}
			return nil
		})
		var detail struct {
			Topic   string
			Configs []topicConfigJSON
			Route   routeJSON
			Queues  []queueJSON
		}
		e.api("GET", "/topics/"+topic, nil, 200, &detail)
		if len(detail.Configs) != 1 || detail.Configs[0].WriteQueues != 6 || len(detail.Queues) != 6 ||
			detail.Route.Brokers[0].Addrs["0"] != c.Broker(0).Addr() {
			t.Fatalf("topic detail %+v", detail)
		}
		e.apiError("GET", "/topics/no-such-topic", nil, nil, 404, "TOPIC_NOT_EXIST")
	})

	p := e.producer()
	t.Run("messages", func(t *testing.T) {
		e := e.with(t)
		res, err := p.Send(ctx, &client.Message{Topic: topic, Tag: "paid", Keys: []string{"order-42"}, Body: []byte(`{"id":42}`),
			Properties: map[string]string{"tenant": "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		var found messagesJSON
		c.WaitFor(10*time.Second, func() error {
			e.api("GET", "/messages?topic="+topic+"&key=order-42", nil, 200, &found)
			if len(found.Messages) != 1 {
				return fmt.Errorf("found %+v", found)
			}
			return nil
		})
		s := found.Messages[0]
		if s.MsgID != res.MsgID || s.OffsetMsgID != res.OffsetMsgID || s.Tags != "paid" || len(s.Keys) != 1 || s.Keys[0] != "order-42" ||
			s.BodySize != 9 || s.Broker != "broker-a" || !strings.HasSuffix(string(mustJSON(t, s.StoreTime)), `Z"`) {
			t.Fatalf("summary %+v", s)
		}
		var one struct {
			Message struct {
				summaryJSON
				Properties map[string]string
				Body       string
				BodyText   *string
				StoreHost  string
			}
			Trace []hopJSON
		}
		for _, id := range []string{res.MsgID, res.OffsetMsgID} {
			e.api("GET", "/messages/"+id+"?topic="+topic, nil, 200, &one)
			m := one.Message
			if m.MsgID != res.MsgID || m.BodyText == nil || *m.BodyText != `{"id":42}` || m.Body != "eyJpZCI6NDJ9" ||
				m.Properties["tenant"] != "acme" || m.Properties["KEYS"] != "order-42" || m.StoreHost == "" {
				t.Fatalf("message %s: %+v", id, m)
			}
			if len(one.Trace) == 0 || one.Trace[0].Kind != "origin" || one.Trace[0].Topic != topic {
				t.Fatalf("trace %+v", one.Trace)
			}
		}
		var byTime messagesJSON
		e.api("GET", "/messages?topic="+topic+"&begin=1h", nil, 200, &byTime)
		if len(byTime.Messages) != 1 || byTime.Messages[0].MsgID != res.MsgID || byTime.Capped {
			t.Fatalf("by time %+v", byTime)
		}
		e.api("GET", "/messages?topic="+topic+"&begin=2h&end=1h", nil, 200, &byTime)
		if len(byTime.Messages) != 0 {
			t.Fatalf("an hour ago %+v", byTime)
		}
		e.apiError("GET", "/messages?topic="+topic+"&begin=1h&end=2h", nil, nil, 400, "INVALID_PARAMETER")
		var byID messagesJSON
		e.api("GET", "/messages?id="+res.MsgID, nil, 200, &byID)
		if len(byID.Messages) != 1 || byID.Messages[0].OffsetMsgID != res.OffsetMsgID {
			t.Fatalf("by id %+v", byID)
		}
		e.apiError("GET", "/messages/0A0B0C0D0E0F00000000000000000000?topic="+topic, nil, nil, 404, "QUERY_NOT_FOUND")
		e.apiError("GET", "/messages?key=x", nil, nil, 400, "INVALID_PARAMETER")
	})

	const group = "console-billing"
	t.Run("dead letters and replay", func(t *testing.T) {
		e := e.with(t)
		var sent []string
		for i := range 3 {
			r, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte(fmt.Sprintf("dead %d", i))})
			if err != nil {
				t.Fatal(err)
			}
			sent = append(sent, r.MsgID)
		}
		failing := e.consumer(group, topic, client.ConsumeFromFirst, client.ErrorListener(func(ctx context.Context, _ []*client.MessageExt) error {
			client.SetRetryDelayLevel(ctx, -1)
			return fmt.Errorf("bad data")
		}))
		var dls struct{ DeadLetters []deadLetterJSON }
		c.WaitFor(30*time.Second, func() error {
			e.api("GET", "/dlq/"+group, nil, 200, &dls)
			if len(dls.DeadLetters) != 4 { // the key message too
				return fmt.Errorf("%d dead letters", len(dls.DeadLetters))
			}
			return nil
		})
		if err := failing.Close(); err != nil {
			t.Fatal(err)
		}
		d := dls.DeadLetters[0]
		if d.OriginTopic != topic || d.FailureReason != "bad data" || d.Replayed || d.Replay != nil || d.Topic != "%DLQ%"+group {
			t.Fatalf("dead letter %+v", d)
		}
		// The trace of a dead letter: its origin, then the dead letter.
		var tr struct{ Trace []hopJSON }
		e.api("GET", "/messages/"+d.MsgID+"?topic="+topic, nil, 200, &tr)
		if n := len(tr.Trace); n < 2 || tr.Trace[0].Kind != "origin" || tr.Trace[n-1].Kind != "dlq" || tr.Trace[n-1].Group != group {
			t.Fatalf("trace of a dead letter %+v", tr.Trace)
		}
		var groups struct{ Groups []dlqGroupJSON }
		e.api("GET", "/dlq", nil, 200, &groups)
		if len(groups.Groups) != 1 || groups.Groups[0].Group != group || groups.Groups[0].Messages != 4 {
			t.Fatalf("dlq groups %+v", groups)
		}
		// Export: one line a dead letter, with its body.
		code, hdr, b := e.do("GET", "/console/api/dlq/"+group+"/export", nil, nil)
		if code != 200 || hdr.Get("Content-Type") != "application/x-ndjson" || !strings.Contains(hdr.Get("Content-Disposition"), "attachment") {
			t.Fatalf("export: %d %v", code, hdr)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		bodies := map[string]string{} // msg id → body
		for _, l := range lines {
			var x deadLetterExportJSON
			if err := json.Unmarshal([]byte(l), &x); err != nil || x.BodyText == nil || x.Body == "" || x.Properties == nil {
				t.Fatalf("export line %s: %v", l, err)
			}
			bodies[x.MsgID] = *x.BodyText
		}
		if len(lines) != 4 || len(bodies) != 4 {
			t.Fatalf("export lines %q", lines)
		}

		// A dry run changes nothing.
		prog, final := e.replay(group, map[string]any{"dryRun": true})
		if len(prog) != 4 || final.Summary.Replayed != 4 || !final.Summary.DryRun {
			t.Fatalf("dry run: %+v %+v", prog, final)
		}
		e.api("GET", "/dlq/"+group, nil, 200, &dls)
		for _, d := range dls.DeadLetters {
			if d.Replayed {
				t.Fatalf("replayed by a dry run: %+v", d)
			}
		}

		var mu sync.Mutex
		got := map[string]int{}
		e.consumer("console-fixed", topic, client.ConsumeFromTimestamp(time.Now()), client.ConcurrentListener(func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				got[string(m.Body)]++
			}
			return client.ConsumeSuccess
		}))
		// The fixed consumer owns its queues before the replay.
		c.WaitFor(20*time.Second, func() error {
			var g struct{ Online *onlineJSON }
			if err := e.get("/groups/console-fixed", &g); err != nil {
				return err
			}
			if g.Online == nil || len(g.Online.ClientIDs) != 1 {
				return fmt.Errorf("console-fixed not online: %+v", g)
			}
			return nil
		})
		prog, final = e.replay(group, map[string]any{"ids": []string{dls.DeadLetters[1].MsgID, dls.DeadLetters[2].MsgID}})
		if len(prog) != 2 || prog[1].Done != 2 || prog[1].Total != 2 || final.Summary.Replayed != 2 || final.Summary.DryRun {
			t.Fatalf("replay: %+v %+v", prog, final)
		}
		want := []string{bodies[dls.DeadLetters[1].MsgID], bodies[dls.DeadLetters[2].MsgID]}
		c.WaitFor(30*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			for _, w := range want {
				if got[w] != 1 {
					return fmt.Errorf("replayed %q consumed %d times (%v)", w, got[w], got)
				}
			}
			return nil
		})
		_, final = e.replay(group, map[string]any{"ids": []string{dls.DeadLetters[1].MsgID}})
		if final.Summary.Skipped != 1 || final.Summary.Replayed != 0 {
			t.Fatalf("second replay: %+v", final)
		}
		e.apiError("POST", "/dlq/"+group+"/replay", map[string]any{"ids": []string{}}, nil, 400, "INVALID_PARAMETER")
	})

	t.Run("groups and reset", func(t *testing.T) {
		e := e.with(t)
		var list struct{ Groups []groupJSON }
		e.api("GET", "/groups", nil, 200, &list)
		var g *groupJSON
		for i := range list.Groups {
			if list.Groups[i].Group == group {
				g = &list.Groups[i]
			}
		}
		if g == nil || g.TotalLag == nil || g.Clients != 0 || g.Model != "" {
			t.Fatalf("groups %+v", list.Groups)
		}
		before, err := adm.ConsumeStats(ctx, group, topic)
		if err != nil {
			t.Fatal(err)
		}
		var reset struct {
			DryRun  bool
			Changes []offsetChangeJSON
		}
		e.api("POST", "/groups/"+group+"/reset", map[string]any{"topic": topic, "to": "earliest", "dryRun": true}, 200, &reset)
		moved := 0
		for _, ch := range reset.Changes {
			if ch.Topic != topic || ch.After != 0 {
				t.Fatalf("change %+v", ch)
			}
			if ch.Before > 0 {
				moved++
			}
		}
		if !reset.DryRun || len(reset.Changes) != 6 || moved == 0 {
			t.Fatalf("reset preview %+v", reset)
		}
		after, err := adm.ConsumeStats(ctx, group, topic)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(before.Queues) != fmt.Sprint(after.Queues) {
			t.Fatalf("a dry run moved offsets: %v → %v", before.Queues, after.Queues)
		}
		e.apiError("POST", "/groups/"+group+"/reset", map[string]any{"topic": topic, "to": "yesterday"}, nil, 400, "INVALID_PARAMETER")
		// A group with a member online: a real reset needs force.
		e.consumer("console-online", topic, client.ConsumeFromFirst, client.ConcurrentListener(
			func(context.Context, []*client.MessageExt) client.ConsumeResult { return client.ConsumeSuccess }))
		c.WaitFor(20*time.Second, func() error {
			var g struct{ Online *onlineJSON }
			if err := e.get("/groups/console-online", &g); err != nil {
				return err
			}
			if g.Online == nil || len(g.Online.ClientIDs) != 1 || g.Online.Model != "CLUSTERING" {
				return fmt.Errorf("console-online not online: %+v", g)
			}
			return nil
		})
		var online groupDetailJSON
		e.api("GET", "/groups/console-online", nil, 200, &online)
		if cs := online.Connections; cs == nil || len(cs.Consumers) != 1 || cs.Consumers[0].ConsumeType != "PUSH" ||
			cs.Consumers[0].Subscriptions[topic] != "*" || cs.Consumers[0].Broker != "broker-a" || online.Error != "" {
			t.Fatalf("connections %+v (%s)", online.Connections, online.Error)
		}
		msg := e.apiError("POST", "/groups/console-online/reset", map[string]any{"topic": topic, "to": "latest"}, nil, 400, "INVALID_PARAMETER")
		if !strings.Contains(msg, "online") {
			t.Fatalf("refusal %q", msg)
		}
		e.api("POST", "/groups/console-online/reset", map[string]any{"topic": topic, "to": "latest", "force": true}, 200, &reset)
		if reset.DryRun || len(reset.Changes) != 6 {
			t.Fatalf("forced reset %+v", reset)
		}

		var detail groupDetailJSON
		e.api("GET", "/groups/"+group, nil, 200, &detail)
		if detail.Group != group || len(detail.Queues) == 0 || detail.Online != nil {
			t.Fatalf("group detail %+v", detail)
		}
		e.apiError("GET", "/groups/no-such-group", nil, nil, 404, "SUBSCRIPTION_GROUP_NOT_EXIST")

		var put struct {
			Group    string
			Created  bool
			Declared []declaredJSON
		}
		e.api("PUT", "/groups/console-pop", map[string]any{"maxDeliveryAttempts": 5, "retryBackoff": []string{"1s", "10s"}}, 200, &put)
		if !put.Created || len(put.Declared) != 1 || put.Declared[0].MaxDeliveryAttempts != 5 || len(put.Declared[0].RetryBackoff) != 2 {
			t.Fatalf("declared %+v", put)
		}
		e.api("PUT", "/groups/console-pop", map[string]any{"fifo": true}, 200, &put)
		if put.Created || !put.Declared[0].FIFO || put.Declared[0].MaxDeliveryAttempts != 5 {
			t.Fatalf("updated %+v", put)
		}
		sg, err := adm.SubscriptionGroup(ctx, "console-pop")
		if err != nil || !sg[0].FIFO || sg[0].MaxDeliveryAttempts != 5 {
			t.Fatalf("SDK sees %+v %v", sg, err)
		}
	})

	t.Run("delay and transactions", func(t *testing.T) {
		e := e.with(t)
		var d struct{ Brokers []delayBrokerJSON }
		e.api("GET", "/delay", nil, 200, &d)
		if len(d.Brokers) != 1 || d.Brokers[0].Broker != "broker-a" || d.Brokers[0].Timer == nil || d.Brokers[0].Error != "" {
			t.Fatalf("delay %+v", d)
		}
		tp, err := client.NewTransactionProducer("console-txn-pg", undecided{}, client.WithNameServers(e.ns...))
		if err != nil {
			t.Fatal(err)
		}
		if err := tp.Start(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := tp.SendInTransaction(ctx, &client.Message{Topic: topic, Keys: []string{"txn-1"}, Body: []byte("pay")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tp.Close(); err != nil {
			t.Fatal(err)
		}
		var tx struct {
			Stats   []txnStatsJSON
			Pending []pendingTxnJSON
		}
		// The half message is pending once the broker dispatched it.
		c.WaitFor(10*time.Second, func() error {
			e.api("GET", "/transactions", nil, 200, &tx)
			if len(tx.Stats) != 1 || tx.Stats[0].Broker != "broker-a" || tx.Stats[0].Pending != 1 || len(tx.Pending) != 1 {
				return fmt.Errorf("transactions %+v", tx)
			}
			return nil
		})
		pt := tx.Pending[0]
		if pt.TransactionID != res.TransactionID || pt.Group != "console-txn-pg" || pt.Topic != topic {
			t.Fatalf("pending %+v", pt)
		}
		var none messagesJSON
		e.api("GET", "/messages?topic="+topic+"&key=txn-1", nil, 200, &none)
		if len(none.Messages) != 0 {
			t.Fatalf("an undecided transaction's message is visible: %+v", none)
		}
		var resolved map[string]bool
		e.api("POST", "/transactions/resolve", map[string]any{"broker": pt.Broker, "commitLogOffset": pt.CommitLogOffset, "commit": true}, 200, &resolved)
		if !resolved["resolved"] {
			t.Fatalf("resolve %v", resolved)
		}
		c.WaitFor(10*time.Second, func() error {
			e.api("GET", "/messages?topic="+topic+"&key=txn-1", nil, 200, &none)
			if len(none.Messages) != 1 {
				return fmt.Errorf("committed message: %+v", none)
			}
			return nil
		})
		e.apiError("POST", "/transactions/resolve", map[string]any{"broker": pt.Broker, "commitLogOffset": pt.CommitLogOffset, "commit": false},
			nil, 409, "TRANSACTION_STATE_CONFLICT")
		e.apiError("POST", "/transactions/resolve", map[string]any{"broker": pt.Broker, "commitLogOffset": 1}, nil, 400, "INVALID_PARAMETER")
		e.apiError("POST", "/delay/cancel", map[string]any{"topic": topic, "msgId": "0A0B0C0D0E0F00000000000000000000"}, nil, 404, "QUERY_NOT_FOUND")
	})

	t.Run("broker config and write permission", func(t *testing.T) {
		e := e.with(t)
		var cfg struct {
			Addr    string
			Entries []configEntryJSON
		}
		e.api("GET", "/brokers/broker-a/config", nil, 200, &cfg)
		keys := map[string]configEntryJSON{}
		for _, en := range cfg.Entries {
			keys[en.Key] = en
		}
		if cfg.Addr != c.Broker(0).Addr() || keys["brokerName"].Value != "broker-a" || !keys["brokerPermission"].Runtime {
			t.Fatalf("config %+v", cfg)
		}
		e.apiError("PUT", "/brokers/broker-a/config", map[string]any{"brokerName": "other"}, nil, 400, "INVALID_PARAMETER")
		e.apiError("GET", "/brokers/broker-z/config", nil, nil, 404, "BROKER_NOT_EXIST")

		var wp struct {
			Brokers  []string
			Writable bool
		}
		e.api("POST", "/brokers/broker-a/write-perm", map[string]any{"writable": false}, 200, &wp)
		if wp.Writable || len(wp.Brokers) != 1 || wp.Brokers[0] != c.Broker(0).Addr() {
			t.Fatalf("write-perm off %+v", wp)
		}
		rt, err := adm.BrokerRuntime(ctx, c.Broker(0).Addr())
		if err != nil || rt.Writable {
			t.Fatalf("runtime after write-perm off: %+v %v", rt, err)
		}
		e.api("POST", "/brokers/broker-a/write-perm", map[string]any{"writable": true}, 200, &wp)
		if !wp.Writable || len(wp.Brokers) != 1 {
			t.Fatalf("write-perm on %+v", wp)
		}
	})

	t.Run("guards", func(t *testing.T) {
		e := e.with(t)
		// CSRF: a mutation without the header, or as a form, changes nothing.
		e.apiError("POST", "/topics", map[string]any{"topic": "csrf"}, map[string]string{"X-Bolide-Console": ""}, 403, "NO_PERMISSION")
		e.apiError("POST", "/topics", map[string]any{"topic": "csrf"}, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 403, "NO_PERMISSION")
		if _, err := adm.Route(ctx, "csrf"); err == nil {
			t.Fatal("a refused mutation created the topic")
		}
		e.apiError("GET", "/nothing-here", nil, nil, 404, "REQUEST_NOT_SUPPORTED")
		e.apiError("DELETE", "/topics", nil, nil, 405, "REQUEST_NOT_SUPPORTED")
		code, _, _ := e.do("POST", "/console/api/topics", nil, map[string]string{"Content-Type": "application/json"})
		if code != 400 {
			t.Fatalf("a mutation without a body: %d", code)
		}
	})
}

// undecided never decides: every local transaction stays unknown.
type undecided struct{}

func (undecided) ExecuteLocalTransaction(context.Context, *client.Message, any) client.LocalTransactionState {
	return client.Unknown
}

func (undecided) CheckLocalTransaction(context.Context, *client.MessageExt) client.LocalTransactionState {
	return client.Unknown
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type replayFinal struct {
	Summary replaySummaryJSON
	Final   bool
	Error   *errorObj
}

// replay posts a replay and reads its NDJSON stream.
func (e *env) replay(group string, body map[string]any) ([]replayProgressJSON, replayFinal) {
	e.t.Helper()
	code, hdr, b := e.do("POST", "/console/api/dlq/"+group+"/replay", body, nil)
	if code != 200 || hdr.Get("Content-Type") != "application/x-ndjson" {
		e.t.Fatalf("replay: %d %s", code, b)
	}
	var prog []replayProgressJSON
	var final replayFinal
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.Contains(line, []byte(`"final":true`)) {
			if err := json.Unmarshal(line, &final); err != nil {
				e.t.Fatal(err)
			}
			continue
		}
		var p replayProgressJSON
		if err := json.Unmarshal(line, &p); err != nil {
			e.t.Fatal(err)
		}
		prog = append(prog, p)
	}
	if !final.Final || final.Error != nil {
		e.t.Fatalf("replay stream %s", b)
	}
	return prog, final
}
