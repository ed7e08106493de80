package delay

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/message"
)

// benchTimerRecord is a stored timer message as the broker writes it: a
// 1 KiB body and a producer's usual properties.
func benchTimerRecord(b *testing.B) []byte {
	host := netip.MustParseAddrPort("10.0.0.1:10911")
	m := &message.Ext{Message: message.Message{Topic: message.TimerTopic, Body: []byte(strings.Repeat("b", 1024)),
		Properties: map[string]string{message.PropertyRealTopic: "bench-topic", message.PropertyRealQueueID: "3",
			message.PropertyTimerOutMS: "1700000000123", message.PropertyTimerDelayMS: "1000",
			message.PropertyUniqueKey: "7F0000010001000000000000000000AB", message.PropertyKeys: "order-123",
			message.PropertyTags: "TagA", message.PropertyWaitStoreMsgOK: "true"}},
		BornHost: host, StoreHost: host, PhysicalOffset: 1 << 30, BornTimestamp: 1700000000000}
	rec, err := message.Encode(nil, m)
	if err != nil {
		b.Fatal(err)
	}
	return rec
}

// The delivery of one timer message, as it was: decode the stored record,
// restore the message, encode it for the real topic.
func BenchmarkDeliverDecodeEncode(b *testing.B) {
	rec := benchTimerRecord(b)
	host := netip.MustParseAddrPort("10.0.0.2:10911")
	var buf []byte
	b.ReportAllocs()
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		m, err := message.Decode(rec)
		if err != nil {
			b.Fatal(err)
		}
		r, err := RealMessage(m, 1700000000123)
		if err != nil {
			b.Fatal(err)
		}
		r.StoreHost = host
		if buf, err = message.EncodeUnsealed(buf[:0], r); err != nil {
			b.Fatal(err)
		}
	}
}

// The delivery of one timer message now: copy the stored record, patched.
func BenchmarkDeliverRestoreRecord(b *testing.B) {
	rec := benchTimerRecord(b)
	host := netip.MustParseAddrPort("10.0.0.2:10911")
	var buf []byte
	b.ReportAllocs()
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		var err error
		if buf, _, err = restoreRecord(buf[:0], rec, host, 1700000000123); err != nil {
			b.Fatal(err)
		}
	}
}

// What the index reads of a timer record, as it was (DecodeDispatch and a
// search for the marker and origin keys) and now.
func BenchmarkIndexDecodeDispatch(b *testing.B) {
	rec := benchTimerRecord(b)
	cancelKey, originKey := []byte(PropertyTimerCancel+"\x01"), []byte(message.PropertyTimerOrigin+"\x01")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := message.DecodeDispatch(rec); err != nil {
			b.Fatal(err)
		}
		_ = bytes.Contains(rec, cancelKey)
		_ = bytes.Contains(rec, originKey)
	}
}

func BenchmarkIndexScan(b *testing.B) {
	rec := benchTimerRecord(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := scanTimerRecord(rec); err != nil {
			b.Fatal(err)
		}
	}
}
