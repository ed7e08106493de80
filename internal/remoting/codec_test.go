package remoting

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	c := &Command{Code: 10, Language: "GO", Version: 317, Opaque: 7, Flag: FlagResponse, Remark: "a \"quoted\"\n\x01 remark ü",
		Ext: map[string]string{"topic": "T", "queueId": "1", "properties": "TAGS\x01a\x02KEYS\x01k\x02"}, Body: []byte("hello")}
	frame := AppendFrame(nil, c)
	if n := binary.BigEndian.Uint32(frame); int(n) != len(frame)-4 {
		t.Fatalf("length %d, frame %d", n, len(frame))
	}
	got, err := ReadFrame(bytes.NewReader(frame), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := DecodeFrame(got)
	if err != nil {
		t.Fatal(err)
	}
	if d.Code != 10 || d.Version != 317 || d.Opaque != 7 || d.Flag != FlagResponse || d.Remark != c.Remark ||
		d.Language != "GO" || string(d.Body) != "hello" || len(d.Ext) != 3 || d.Ext["properties"] != c.Ext["properties"] {
		t.Fatalf("decoded %+v", d)
	}
	// The header is standard JSON whose extFields are all strings.
	hl := binary.BigEndian.Uint32(frame[4:]) & 0xFFFFFF
	var h struct {
		Code      int               `json:"code"`
		ExtFields map[string]string `json:"extFields"`
	}
	if err := json.Unmarshal(frame[8:8+hl], &h); err != nil || h.Code != 10 || h.ExtFields["topic"] != "T" {
		t.Fatalf("header %s: %v %+v", frame[8:8+hl], err, h)
	}
	if bytes.ContainsAny(frame[8:8+hl], " \n") && !strings.Contains(c.Remark, " ") {
		t.Fatalf("header not compact: %s", frame[8:8+hl])
	}
}

func TestDecodeJavaHeader(t *testing.T) {
	// What a Java client writes: other keys, null remark, extFields of strings.
	h := `{"code":310,"extFields":{"a":"PG","b":"T","e":"2","m":"false","num":5,"ok":true,"nil":null},"flag":0,"language":"JAVA",` +
		`"opaque":42,"serializeTypeCurrentRPC":"JSON","version":453,"remark":null,"extra":{"x":[1,{"y":"z"}]}}`
	d, err := DecodeFrame(jsonFrame(h, "body"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Code != 310 || d.Opaque != 42 || d.Language != "JAVA" || d.Version != 453 || d.Remark != "" ||
		d.Ext["a"] != "PG" || d.Ext["e"] != "2" || d.Ext["num"] != "5" || d.Ext["ok"] != "true" || d.Has("nil") || string(d.Body) != "body" {
		t.Fatalf("decoded %+v", d)
	}
	if d.IsResponse() || d.IsOneway() {
		t.Fatal("flags")
	}
}

func TestDecodeEscapes(t *testing.T) {
	d, err := DecodeFrame(jsonFrame(`{"code":1,"remark":"a\"b\\c\/d\n\u00fc\ud83d\ude00","extFields":{"k\u0001":"v\t"}}`, ""))
	if err != nil {
		t.Fatal(err)
	}
	if d.Remark != "a\"b\\c/d\nü😀" || d.Ext["k\x01"] != "v\t" {
		t.Fatalf("%q %q", d.Remark, d.Ext)
	}
}

func TestDecodeBinaryHeader(t *testing.T) {
	var h []byte
	h = binary.BigEndian.AppendUint16(h, 105)
	h = append(h, 9) // GO
	h = binary.BigEndian.AppendUint16(h, 317)
	h = binary.BigEndian.AppendUint32(h, 3)
	h = binary.BigEndian.AppendUint32(h, 0)
	h = binary.BigEndian.AppendUint32(h, 2)
	h = append(h, "rk"...)
	var ext []byte
	ext = binary.BigEndian.AppendUint16(ext, 5)
	ext = append(ext, "topic"...)
	ext = binary.BigEndian.AppendUint32(ext, 1)
	ext = append(ext, 'T')
	h = binary.BigEndian.AppendUint32(h, uint32(len(ext)))
	h = append(h, ext...)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(h))|1<<24)
	frame = append(frame, h...)
	d, err := DecodeFrame(frame)
	if err != nil {
		t.Fatal(err)
	}
	if d.Code != 105 || d.Language != "GO" || d.Version != 317 || d.Opaque != 3 || d.Remark != "rk" || d.Ext["topic"] != "T" {
		t.Fatalf("%+v", d)
	}
	// Every truncation is an error, never a panic.
	for i := 4; i < len(frame); i++ {
		trunc := append([]byte(nil), frame[:i]...)
		binary.BigEndian.PutUint32(trunc, uint32(i-4)|1<<24)
		if _, err := DecodeFrame(trunc); err == nil {
			t.Fatalf("truncated at %d decoded", i)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	for name, frame := range map[string][]byte{
		"short":             {0, 0},
		"header too long":   {0, 0, 0, 9, '{', '}'},
		"unknown type":      {7, 0, 0, 2, '{', '}'},
		"not JSON":          jsonFrame(`{"code":10,`, ""),
		"ext not object":    jsonFrame(`{"code":10,"extFields":[]}`, ""),
		"code not number":   jsonFrame(`{"code":"10"}`, ""),
		"code overflows":    jsonFrame(`{"code":99999999999}`, ""),
		"trailing":          jsonFrame(`{"code":10} x`, ""),
		"nested too deep":   jsonFrame(`{"x":`+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`}`, ""),
		"control in string": jsonFrame("{\"remark\":\"a\nb\"}", ""),
	} {
		if _, err := DecodeFrame(frame); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestReadFrameLimits(t *testing.T) {
	big := binary.BigEndian.AppendUint32(nil, 1<<30)
	if _, err := ReadFrame(bytes.NewReader(big), 1<<20, nil); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 2, 1, 1}), 0, nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short length: %v", err)
	}
	// A length that lies: 1 MiB claimed, 10 bytes sent. The reader fails
	// with the bytes it had, having allocated for what arrived only.
	lie := append(binary.BigEndian.AppendUint32(nil, 1<<20), make([]byte, 10)...)
	if _, err := ReadFrame(bytes.NewReader(lie), 0, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("lying length: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		_, _ = ReadFrame(bytes.NewReader(lie), 0, nil)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 10*(64<<10+1024) {
		t.Fatalf("10 lying frames allocated %d bytes", n)
	}
}

func jsonFrame(header, body string) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(len(header)))
	f = append(f, header...)
	return append(f, body...)
}
