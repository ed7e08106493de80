package message

import "testing"

func benchExt() *Ext {
	e := baseExt()
	e.Body = make([]byte, 1024)
	for i := range e.Body {
		e.Body[i] = byte(i)
	}
	return e
}

func benchRecord(b *testing.B) []byte {
	rec, err := Encode(nil, benchExt())
	if err != nil {
		b.Fatal(err)
	}
	return rec
}

func BenchmarkEncode1KiB(b *testing.B) {
	e := benchExt()
	rec := benchRecord(b)
	buf := make([]byte, 0, len(rec))
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = Encode(buf[:0], e)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify1KiB(b *testing.B) {
	rec := benchRecord(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Verify(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeDispatch1KiB(b *testing.B) {
	rec := benchRecord(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeDispatch(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode1KiB(b *testing.B) {
	rec := benchRecord(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStamp1KiB(b *testing.B) {
	rec := benchRecord(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		Stamp(rec, i, i<<10, i)
	}
}

func BenchmarkUniqueID(b *testing.B) {
	g := NewUniqueIDGenerator(hostA.Addr())
	b.ReportAllocs()
	for b.Loop() {
		_ = g.Next()
	}
}
