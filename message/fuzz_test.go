package message

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// decodeSeeds are the in-code seeds of FuzzDecodeRecord (testdata/fuzz holds
// more).
func decodeSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, tc := range roundTripCases() {
		if len(tc.ext.Topic) > 1000 || len(tc.ext.Properties[("k")]) > 1000 {
			continue // keep the seeds small
		}
		rec, err := Encode(nil, tc.ext)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, rec)
	}
	rec := smallRecord(t)
	blank := make([]byte, 64)
	EncodeBlank(blank, 64)
	flipped := append([]byte(nil), rec...)
	flipped[40] ^= 4
	seeds = append(seeds,
		nil,
		make([]byte, 8),
		blank[:8],
		blank,
		rec[:len(rec)/2],
		rec[:len(rec)-1],
		append(append([]byte(nil), rec...), 0),
		flipped,
	)
	return seeds
}

func FuzzDecodeRecord(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if h, err := PeekHeader(data); err == nil && h.IsBlank() && h.IsRecord() {
			t.Fatal("a header cannot be both blank and a record")
		}
		_, _ = RecordChecksum(data)

		verr := Verify(data)
		_, derr := Decode(data)
		_, dderr := DecodeDispatch(data)
		if (derr == nil) != (dderr == nil) {
			t.Fatalf("Decode error %v but DecodeDispatch error %v", derr, dderr)
		}
		if derr == nil {
			checkDispatch(t, data)
		} else if !errors.Is(derr, ErrCorrupt) {
			t.Fatalf("Decode error %v does not wrap ErrCorrupt", derr)
		}
		if verr == nil {
			checkVerified(t, data)
			return
		}
		if !errors.Is(verr, ErrCorrupt) && !errors.Is(verr, ErrChecksum) {
			t.Fatalf("Verify error %v wraps neither ErrCorrupt nor ErrChecksum", verr)
		}

		// Random bytes almost never carry valid checksums, so also fix the
		// size field and both checksums and try again: this lets the fuzzer
		// explore records that verify.
		fixed := append([]byte(nil), data...)
		if len(fixed) < BlankSize {
			return
		}
		binary.BigEndian.PutUint32(fixed, uint32(len(fixed)))
		v, err := parse(fixed)
		if err != nil {
			return
		}
		binary.BigEndian.PutUint32(fixed[PosBodyCRC:], Checksum(v.body))
		if _, ok := RecordChecksum(fixed); ok {
			Seal(fixed)
		}
		if Verify(fixed) == nil {
			checkVerified(t, fixed)
		}
	})
}

// checkVerified checks what must hold for a record Verify accepts: it
// decodes, and re-encodes to a record that verifies and decodes to the same
// message; stamping keeps it verified.
func checkVerified(t *testing.T, data []byte) {
	t.Helper()
	e, derr := Decode(data)
	if derr != nil {
		t.Fatalf("Verify accepted a record Decode rejects: %v", derr)
	}
	checkDispatch(t, data)
	{
		if int(e.StoreSize) != len(data) || e.BodyCRC != Checksum(e.Body) {
			t.Fatalf("verified record: StoreSize %d of %d bytes, BodyCRC %d for crc %d",
				e.StoreSize, len(data), e.BodyCRC, Checksum(e.Body))
		}
		if _, ok := e.Properties[PropertyCRC32]; ok {
			t.Fatal("Decode returned the checksum trailer as a property")
		}
		rec2, err := Encode(nil, e)
		if err != nil {
			t.Fatalf("re-encoding a verified record: %v", err)
		}
		if len(rec2) > len(data) {
			t.Fatalf("re-encoded record grew from %d to %d bytes", len(data), len(rec2))
		}
		if err := Verify(rec2); err != nil {
			t.Fatalf("re-encoded record does not verify: %v", err)
		}
		e2, err := Decode(rec2)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		checkDecoded(t, e, e2, len(rec2))
		rec3, err := Encode(nil, e2)
		if err != nil || !bytes.Equal(rec3, rec2) {
			t.Fatalf("encoding is not a fixed point: %v", err)
		}

		// Stamping a verified record keeps it verified.
		stamped := append([]byte(nil), data...)
		Stamp(stamped, ^e.QueueOffset, e.PhysicalOffset+1, e.StoreTimestamp^0x5555)
		if err := Verify(stamped); err != nil {
			t.Fatalf("Verify after Stamp: %v", err)
		}
		s, err := Decode(stamped)
		if err != nil {
			t.Fatal(err)
		}
		if s.QueueOffset != ^e.QueueOffset || s.PhysicalOffset != e.PhysicalOffset+1 ||
			s.StoreTimestamp != e.StoreTimestamp^0x5555 || s.BornTimestamp != e.BornTimestamp ||
			s.StoreHost != e.StoreHost || s.BornHost != e.BornHost || s.ReconsumeTimes != e.ReconsumeTimes {
			t.Fatalf("Stamp: decoded %+v, was %+v", s, e)
		}
	}
}

// fuzzHost makes a host from fuzzed bytes: 16 or more bytes give an IPv6
// address (possibly IPv4-mapped), 4 to 15 an IPv4 address, fewer none.
func fuzzHost(addr []byte, port uint16) netip.AddrPort {
	switch {
	case len(addr) >= 16:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(addr[:16])), port)
	case len(addr) >= 4:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(addr[:4])), port)
	}
	return netip.AddrPortFrom(netip.Addr{}, port)
}

func FuzzEncodeDecode(f *testing.F) {
	f.Add("TopicTest", []byte("Hello RocketMQ"), uint8(2), "TAGS", "TagA", "KEYS", "k1 k2",
		int32(3), int32(0), int32(0), int64(10), int64(4096), int64(1700000000123), int64(1700000000456),
		[]byte{192, 168, 0, 10}, uint16(54321), []byte{10, 0, 0, 1}, uint16(10911), int32(0), int64(0))
	f.Add(strings.Repeat("t", 200), []byte{}, uint8(0), "", "", "", "",
		int32(-1), int32(-1), int32(SysFlagTransPrepared|SysFlagBornHostV6), int64(-1), int64(1<<62), int64(0), int64(-5),
		netip.MustParseAddr("2001:db8::1").AsSlice(), uint16(1), netip.MustParseAddr("::ffff:1.2.3.4").AsSlice(), uint16(2),
		int32(16), int64(77))
	f.Add("T", []byte(nil), uint8(1), "", "\x01", "DELAY", "3",
		int32(0), int32(0), int32(0), int64(0), int64(0), int64(0), int64(0),
		[]byte(nil), uint16(0), []byte{1, 2, 3}, uint16(0), int32(0), int64(0))
	f.Add("T", []byte("x"), uint8(2), "a\x02", "b", PropertyCRC32, "1",
		int32(0), int32(0), int32(0), int64(0), int64(0), int64(0), int64(0),
		[]byte(nil), uint16(0), []byte(nil), uint16(0), int32(0), int64(0))
	f.Add("", []byte("x"), uint8(2), "DELAY", "2147483648", "DELAY", "-2",
		int32(0), int32(0), int32(0), int64(0), int64(0), int64(0), int64(0),
		[]byte(nil), uint16(0), []byte(nil), uint16(0), int32(0), int64(0))

	f.Fuzz(func(t *testing.T, topic string, body []byte, nprops uint8, k1, v1, k2, v2 string,
		queueID, flag, sysFlag int32, queueOffset, physicalOffset, bornTS, storeTS int64,
		bornAddr []byte, bornPort uint16, storeAddr []byte, storePort uint16, reconsume int32, prepared int64) {
		e := &Ext{
			Message:                   Message{Topic: topic, Flag: flag, Body: body},
			QueueID:                   queueID,
			QueueOffset:               queueOffset,
			PhysicalOffset:            physicalOffset,
			SysFlag:                   sysFlag,
			BornTimestamp:             bornTS,
			BornHost:                  fuzzHost(bornAddr, bornPort),
			StoreTimestamp:            storeTS,
			StoreHost:                 fuzzHost(storeAddr, storePort),
			ReconsumeTimes:            reconsume,
			PreparedTransactionOffset: prepared,
		}
		if nprops > 0 {
			e.SetProperty(k1, v1)
		}
		if nprops > 1 {
			e.SetProperty(k2, v2)
		}

		// What EncodedLen should say, worked out independently.
		var wantErr error
		propsLen := 20
		for k, v := range e.Properties {
			propsLen += len(k) + len(v) + 2
			if strings.ContainsAny(k, "\x01\x02") || strings.Contains(v, "\x02") || k == "__CRC32#" {
				wantErr = ErrBadProperty
			}
		}
		switch {
		case len(topic) == 0 || len(topic) > 32767:
			wantErr = ErrTooLarge
		case wantErr != nil:
		case propsLen > 32767:
			wantErr = ErrTooLarge
		}

		n, err := EncodedLen(e)
		if !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
			t.Fatalf("EncodedLen error = %v, want %v", err, wantErr)
		}
		rec, encErr := Encode([]byte("pre"), e)
		if !errors.Is(encErr, wantErr) || (wantErr == nil) != (encErr == nil) {
			t.Fatalf("Encode error = %v, want %v", encErr, wantErr)
		}
		if err != nil {
			if string(rec) != "pre" {
				t.Fatalf("Encode changed dst on error")
			}
			return
		}
		if string(rec[:3]) != "pre" || len(rec)-3 != n {
			t.Fatalf("Encode wrote %d bytes, EncodedLen said %d", len(rec)-3, n)
		}
		rec = rec[3:]
		checkLayout(t, rec, e)
		if err := Verify(rec); err != nil {
			t.Fatalf("Verify: %v", err)
		}
		got, err := Decode(rec)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		checkDecoded(t, e, got, n)
		checkDispatch(t, rec)

		// Any single flipped bit is caught.
		i := int(uint64(queueOffset) % uint64(len(rec)))
		rec[i] ^= 1 << (uint64(physicalOffset) % 8)
		if Verify(rec) == nil {
			t.Fatalf("Verify accepted a flipped bit at %d", i)
		}
		rec[i] ^= 1 << (uint64(physicalOffset) % 8)

		// Stamp moves only what it should.
		Stamp(rec, storeTS, bornTS, queueOffset)
		if err := Verify(rec); err != nil {
			t.Fatalf("Verify after Stamp: %v", err)
		}
		got, err = Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		want := *e
		want.QueueOffset, want.PhysicalOffset, want.StoreTimestamp = storeTS, bornTS, queueOffset
		checkDecoded(t, &want, got, n)
		if binary.BigEndian.Uint32(rec) != uint32(n) {
			t.Fatal("Stamp changed TOTALSIZE")
		}
	})
}

// readSeed reads a one-[]byte-argument corpus file of FuzzDecodeRecord.
func readSeed(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzDecodeRecord", name))
	if err != nil {
		t.Fatal(err)
	}
	header, arg, ok := strings.Cut(strings.TrimSpace(string(raw)), "\n")
	if !ok || header != "go test fuzz v1" || !strings.HasPrefix(arg, "[]byte(") || !strings.HasSuffix(arg, ")") {
		t.Fatalf("%s is not a go test fuzz v1 []byte file", name)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(arg, "[]byte("), ")"))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return []byte(s)
}

// TestFuzzSeedCorpus checks that the checked-in seeds are what their names
// say, so the fuzzer starts from valid records, blanks and torn writes.
func TestFuzzSeedCorpus(t *testing.T) {
	for _, name := range []string{"valid_ipv4_small", "valid_ipv4_props", "valid_ipv6_no_props", "valid_v2_topic_empty_body"} {
		if err := Verify(readSeed(t, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if h, err := PeekHeader(readSeed(t, "blank_header")); err != nil || !h.IsBlank() {
		t.Errorf("blank_header: %+v, %v", h, err)
	}
	for _, name := range []string{"truncated_record", "truncated_record_size_fixed", "zero_header"} {
		if err := Verify(readSeed(t, name)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Verify = %v, want ErrCorrupt", name, err)
		}
	}
	if err := Verify(readSeed(t, "bad_record_crc")); !errors.Is(err, ErrChecksum) {
		t.Errorf("bad_record_crc: Verify = %v, want ErrChecksum", err)
	}
}
