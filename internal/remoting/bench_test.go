package remoting

import "testing"

// BenchmarkDecodeSendV2 decodes what a Java producer sends for one message.
func BenchmarkDecodeSendV2(b *testing.B) {
	frame := AppendFrame(nil, NewRequest(SendMessageV2, map[string]string{
		"a": "PG", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1764600000000",
		"h": "0", "i": "TAGS\x01TagA\x02KEYS\x01k1\x02UNIQ_KEY\x01C0A800011F9C18B4AAC2000000000001\x02WAIT\x01true\x02",
		"j": "0", "k": "false", "l": "16", "m": "false", "n": "broker-a"}, make([]byte, 1024)))[4:]
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if _, err := DecodeFrame(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeSendResponse encodes a send's answer.
func BenchmarkEncodeSendResponse(b *testing.B) {
	req := &Command{Opaque: 7}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		resp := req.Reply(Success, "").Set("msgId", "7F00000100002A9F00000000000003E8").Set("queueId", "3").
			Set("queueOffset", "12345").Set("MSG_REGION", "DefaultRegion").Set("TRACE_ON", "true")
		buf = AppendFrame(buf[:0], resp)
	}
}
