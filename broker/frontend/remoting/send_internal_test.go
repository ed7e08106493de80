package remoting

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"maps"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
)

func TestParseProperties(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"", map[string]string{}},
		{"A\x011\x02B\x012\x02", map[string]string{"A": "1", "B": "2"}},
		{"A\x011\x02B\x012", map[string]string{"A": "1", "B": "2"}},                    // no final separator
		{"A\x011\x02junk\x02\x02\x01x\x02C\x01", map[string]string{"A": "1", "C": ""}}, // skipped pairs
		{"K\x01a\x01b\x02", map[string]string{"K": "a\x01b"}},
	} {
		if got := parseProperties(tc.in); !maps.Equal(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
	}
}

func entry(flag int32, body, props string) []byte {
	be := binary.BigEndian
	out := be.AppendUint32(nil, uint32(20+len(body)+2+len(props)))
	out = be.AppendUint32(out, 0)
	out = be.AppendUint32(out, 0)
	out = be.AppendUint32(out, uint32(flag))
	out = be.AppendUint32(out, uint32(len(body)))
	out = append(out, body...)
	out = be.AppendUint16(out, uint16(len(props)))
	return append(out, props...)
}

func TestDecodeBatch(t *testing.T) {
	body := append(entry(1, "a", "T\x01x\x02"), entry(2, "", "")...)
	got, err := decodeBatch(body)
	if err != nil || len(got) != 2 || got[0].flag != 1 || string(got[0].body) != "a" || got[0].properties != "T\x01x\x02" ||
		got[1].flag != 2 || len(got[1].body) != 0 {
		t.Fatalf("%+v %v", got, err)
	}
	for name, bad := range map[string][]byte{
		"empty":          nil,
		"short":          entry(0, "a", "")[:10],
		"body too long":  entry(0, "abc", "")[:22],
		"props too long": entry(0, "a", "xyz")[:24],
		"lying total":    append([]byte{0, 0, 0, 99}, entry(0, "a", "")[4:]...),
		"negative body":  append(entry(0, "", "")[:16], 0xff, 0xff, 0xff, 0xff, 0, 0),
	} {
		if _, err := decodeBatch(bad); !errors.Is(err, errcode.ErrMessageIllegal) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(append(entry(1, "a", "T\x01x\x02"), entry(2, "", "")...))
	f.Add(entry(0, "body", ""))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeBatch(b)
		if err != nil {
			return
		}
		n := 0
		for _, e := range entries {
			n += batchEntryFixed + len(e.body) + len(e.properties)
		}
		if n != len(b) {
			t.Fatalf("entries take %d of %d bytes", n, len(b))
		}
	})
}

func TestInflate(t *testing.T) {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	_, _ = w.Write(bytes.Repeat([]byte("x"), 1000))
	_ = w.Close()
	if out, err := inflate(buf.Bytes(), 0x301, 1000); err != nil || len(out) != 1000 {
		t.Fatalf("zlib: %d %v", len(out), err)
	}
	if _, err := inflate(buf.Bytes(), 0x1, 999); !errors.Is(err, errcode.ErrMessageTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if out, err := inflate([]byte("plain"), 0x300, 10); err != nil || string(out) != "plain" {
		t.Fatalf("not compressed: %q %v", out, err)
	}
	for _, flag := range []int32{0x101, 0x201, 0x401} {
		if _, err := inflate(buf.Bytes(), flag, 1000); !errors.Is(err, errcode.ErrMessageIllegal) {
			t.Fatalf("%#x: %v", flag, err)
		}
	}
}

func TestParseHeartbeat(t *testing.T) {
	body := `{"clientID":"c@1","producerDataSet":[{"groupName":"P"},{"groupName":"P"}],"consumerDataSet":[
		{"groupName":"G","consumeType":"CONSUME_ACTIVELY","messageModel":"BROADCASTING","subscriptionDataSet":[
			{"topic":"T","subString":"","codeSet":[1,2],"subVersion":99999999999999999999,"expressionType":"TAG"},
			{"topic":"S","subString":"a > 1","expressionType":"SQL92"},
			{"topic":"U","subString":"a >","expressionType":"SQL92"},
			{"topic":"V","subString":"a","expressionType":"XPATH"}]}]}`
	hb, dropped, err := parseHeartbeat([]byte(body), broker.Heartbeat{})
	if err != nil || hb.ClientID != "c@1" || len(hb.ProducerGroups) != 1 || len(hb.Consumers) != 1 || len(dropped) != 2 {
		t.Fatalf("%+v %v %v", hb, dropped, err)
	}
	cd := hb.Consumers[0]
	if !cd.Pull || cd.Model != broker.Broadcasting || len(cd.Subscriptions) != 2 || cd.Subscriptions[0] != (broker.Subscription{Topic: "T", Expression: "*"}) ||
		cd.Subscriptions[1] != (broker.Subscription{Topic: "S", Expression: "a > 1", Type: broker.ExprSQL92}) {
		t.Fatalf("%+v", cd)
	}
	// A RocketMQ 5 heartbeat without subscriptions keeps the last ones.
	hb2, _, err := parseHeartbeat([]byte(`{"clientID":"c@1","consumerDataSet":[{"groupName":"G","subscriptionDataSet":[]}],"withoutSub":true}`), hb)
	if err != nil || len(hb2.Consumers) != 1 || len(hb2.Consumers[0].Subscriptions) != 2 || hb2.Consumers[0].Model != broker.Clustering {
		t.Fatalf("%+v %v", hb2, err)
	}
}
