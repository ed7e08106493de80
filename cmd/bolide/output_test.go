package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
)

func TestTableWrite(t *testing.T) {
	tb := newTable("BROKER", "QUEUE", "LAST STORED")
	tb.row("broker-a", 0, time.UnixMilli(1767366245123))
	tb.row("broker-bb", 12, time.Time{})
	tb.row("", int64(-1), "x")
	tb.foot("TOTAL", "", 3)
	var buf bytes.Buffer
	if err := tb.write(&buf); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"BROKER     QUEUE  LAST STORED\n" +
		"broker-a   0      2026-01-02T15:04:05.123Z\n" +
		"broker-bb  12     -\n" +
		"-          -1     x\n" +
		"TOTAL             3\n"
	if buf.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", buf.String(), want)
	}
	// No header: label/value rows.
	buf.Reset()
	tb = &table{}
	tb.row("Errors:", 0)
	if err := tb.write(&buf); err != nil || buf.String() != "Errors:  0\n" {
		t.Fatalf("headerless table %q, %v", buf.String(), err)
	}
}

func TestEmitJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := emitJSON(&buf, map[string]any{"body": "<a & b>", "n": 1}); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != `{"body":"<a & b>","n":1}`+"\n" {
		t.Fatalf("emitJSON = %q", got)
	}
	if err := emitJSON(&buf, make(chan int)); err == nil {
		t.Fatal("emitJSON of a channel succeeded")
	}
}

func TestFormatTime(t *testing.T) {
	ts := time.Date(2026, 1, 2, 17, 4, 5, 120_000_000, time.FixedZone("x", 2*3600))
	if got := formatTime(ts); got != "2026-01-02T15:04:05.120Z" {
		t.Errorf("formatTime = %q", got)
	}
	if formatTime(time.Time{}) != "-" || jsonTime(time.Time{}) != "" {
		t.Error("zero time")
	}
	if !unixMilli(0).IsZero() || !unixMilli(1767366245123).Equal(time.UnixMilli(1767366245123)) {
		t.Error("unixMilli")
	}
}

func TestHumanBytes(t *testing.T) {
	cases := map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 1 << 20: "1.0 MiB",
		5 << 30: "5.0 GiB", 3 << 40: "3.0 TiB"}
	for n, want := range cases {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDisplayBody(t *testing.T) {
	cases := []struct {
		in   []byte
		max  int
		want string
	}{
		{[]byte("hello"), 0, "hello"},
		{[]byte("héllo wörld ✓"), 0, "héllo wörld ✓"},
		{[]byte("two\nlines"), 0, `"two\nlines"`},
		{[]byte("tab\there"), 0, `"tab\there"`},
		{[]byte{0xff, 0x00}, 0, `"\xff\x00"`},
		{[]byte("abcdefghij"), 5, "abcd…"},
		{[]byte("äöüäöü"), 4, "äöü…"},
		{[]byte("abc"), 3, "abc"},
	}
	for _, c := range cases {
		if got := displayBody(c.in, c.max); got != c.want {
			t.Errorf("displayBody(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestMessageJSON(t *testing.T) {
	m := &client.MessageExt{
		Message: client.Message{Topic: "orders", Tag: "paid", Keys: []string{"k1", "k2"}, Body: []byte(`{"x":"<1>"}`),
			Properties: map[string]string{"source": "web"}},
		MsgID: "C0A8000100002A9F0000000000000001", OffsetMsgID: "7F00000100002A9F0000000000000000", BrokerName: "broker-a",
		QueueID: 3, QueueOffset: 42, CommitLogOffset: 4096, BornTimestamp: time.UnixMilli(1767366245000),
		StoreTimestamp: time.UnixMilli(1767366245123), ReconsumeTimes: 1, StoreHost: "127.0.0.1:10911", BornHost: "10.0.0.1:0",
	}
	var buf bytes.Buffer
	if err := emitJSON(&buf, toMessageJSON(m)); err != nil {
		t.Fatal(err)
	}
	want := `{"msgId":"C0A8000100002A9F0000000000000001","offsetMsgId":"7F00000100002A9F0000000000000000","topic":"orders",` +
		`"broker":"broker-a","queueId":3,"queueOffset":42,"commitLogOffset":4096,"tags":"paid","keys":["k1","k2"],` +
		`"properties":{"source":"web"},"body":"{\"x\":\"<1>\"}","bodySize":11,"bornTimestamp":"2026-01-02T15:04:05.000Z",` +
		`"storeTimestamp":"2026-01-02T15:04:05.123Z","bornHost":"10.0.0.1:0","storeHost":"127.0.0.1:10911","reconsumeTimes":1}` + "\n"
	if buf.String() != want {
		t.Fatalf("message JSON\n got %s\nwant %s", buf.String(), want)
	}

	// Empty keys and properties are [] and {}, never null; a body that is
	// not UTF-8 is base64.
	bin := &client.MessageExt{Message: client.Message{Topic: "t", Body: []byte{0xff, 0xfe, 0x00}}}
	j := toMessageJSON(bin)
	raw, _ := json.Marshal(j)
	if !strings.Contains(string(raw), `"keys":[]`) || !strings.Contains(string(raw), `"properties":{}`) {
		t.Errorf("empty keys or properties: %s", raw)
	}
	if j.BodyEncoding != "base64" || j.Body != base64.StdEncoding.EncodeToString(bin.Body) || j.BodySize != 3 {
		t.Errorf("binary body: %+v", j)
	}
}

func TestMessageLines(t *testing.T) {
	m := &client.MessageExt{Message: client.Message{Topic: "orders", Tag: "paid", Keys: []string{"order-42"}, Body: []byte("hello world")},
		BrokerName: "broker-a", QueueID: 3, QueueOffset: 120, StoreTimestamp: time.UnixMilli(1767366245123)}
	var buf bytes.Buffer
	writeMessageLineHeader(&buf)
	writeMessageLine(&buf, m)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[1], " hello world") ||
		!strings.Contains(lines[1], "2026-01-02T15:04:05.123Z") || !strings.HasPrefix(lines[1], "broker-a") {
		t.Fatalf("lines:\n%s", buf.String())
	}
	buf.Reset()
	writeMessageDetail(&buf, m, client.ByMsgID.String())
	for _, want := range []string{"Matched by:       msg id\n", "Queue:            broker-a#3 offset 120\n", "Body:             11 bytes\nhello world\n"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("detail lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestOneLine(t *testing.T) {
	cases := map[string]string{
		"simple":       "simple",
		"a\nb":         "a; b",
		"a\n\n  b  \n": "a; b",
		"unknown command \"topc\" for \"bolide\"\n\nDid you mean this?\n\ttopic\n": `unknown command "topc" for "bolide" (did you mean topic?)`,
	}
	for in, want := range cases {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDescribeError(t *testing.T) {
	a := &app{nameServers: []string{"127.0.0.1:1"}, timeout: 2 * time.Second}
	cases := []struct {
		err  error
		want string
	}{
		{forTopic("orders", fmt.Errorf("%w %q: %w", client.ErrNoRoute, "orders", client.ErrTopicNotExist)),
			`topic "orders" does not exist`},
		{forTopic("orders", fmt.Errorf("create: %w", client.ErrTopicExists)), `topic "orders" already exists`},
		{fmt.Errorf("list topics: %w: %w", client.ErrNoNameServer,
			errors.New(`NameServer 127.0.0.1:1: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`)),
			"cannot reach the NameServer at 127.0.0.1:1: connection refused"},
		{fmt.Errorf("list topics: %w: %w", client.ErrNoNameServer,
			errors.New("NameServer x:1: rpc error: code = Unimplemented desc = unexpected HTTP status code; malformed header")),
			"cannot reach the NameServer at 127.0.0.1:1: unexpected HTTP status code"},
		{fmt.Errorf("list topics: NameServer 127.0.0.1:1: %w", context.DeadlineExceeded),
			"the NameServer at 127.0.0.1:1 did not answer within 2s"},
		{fmt.Errorf("pull: %w", context.DeadlineExceeded), "timed out after 2s (raise --timeout): pull: context deadline exceeded"},
		{errors.New("first\nsecond"), "first; second"},
	}
	for _, c := range cases {
		got := a.describeError(c.err)
		if !strings.HasPrefix(got, c.want) || strings.Contains(got, "\n") {
			t.Errorf("describeError(%v)\n = %q\nwant prefix %q", c.err, got, c.want)
		}
	}
}
