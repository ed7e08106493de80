package consumequeue

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestEncodeDecodeUnit(t *testing.T) {
	tests := []struct {
		name string
		u    Unit
		want []byte
	}{
		{"zero", Unit{}, make([]byte, 20)},
		{"simple", Unit{Offset: 1, Size: 2, TagHash: 3},
			[]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3}},
		{"big-endian", Unit{Offset: 0x0102030405060708, Size: 0x090a0b0c, TagHash: 0x0d0e0f1011121314},
			[]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}},
		{"negative tag hash", Unit{Offset: 100, Size: 10, TagHash: -1},
			[]byte{0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"pre-blank", blankUnit,
			[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"extremes", Unit{Offset: math.MaxInt64, Size: math.MinInt32, TagHash: math.MinInt64},
			[]byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := bytes.Repeat([]byte{0xAA}, 24)
			EncodeUnit(buf, tt.u)
			if !bytes.Equal(buf[:20], tt.want) {
				t.Fatalf("EncodeUnit = % x, want % x", buf[:20], tt.want)
			}
			if !bytes.Equal(buf[20:], []byte{0xAA, 0xAA, 0xAA, 0xAA}) {
				t.Fatalf("EncodeUnit wrote past 20 bytes: % x", buf[20:])
			}
			got, err := DecodeUnit(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.u {
				t.Fatalf("DecodeUnit = %+v, want %+v", got, tt.u)
			}
		})
	}
}

func TestDecodeUnitShort(t *testing.T) {
	for _, n := range []int{0, 1, 19} {
		if _, err := DecodeUnit(make([]byte, n)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeUnit(%d bytes) error = %v, want ErrCorrupt", n, err)
		}
	}
	if _, err := DecodeUnit(make([]byte, 21)); err != nil {
		t.Errorf("DecodeUnit(21 bytes) = %v", err)
	}
}

func TestUnitCheckPut(t *testing.T) {
	tests := []struct {
		u  Unit
		ok bool
	}{
		{Unit{Offset: 0, Size: 1}, true},
		{Unit{Offset: 10, Size: 100, TagHash: -5}, true},
		{Unit{Offset: -1, Size: 1}, false},
		{Unit{Offset: 0, Size: 0}, false},
		{Unit{Offset: 0, Size: -3}, false},
		{blankUnit, false},
		{Unit{Offset: math.MaxInt64 - 1, Size: 2}, false},
	}
	for _, tt := range tests {
		err := tt.u.checkPut()
		if (err == nil) != tt.ok {
			t.Errorf("checkPut(%+v) = %v, want ok=%v", tt.u, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("checkPut(%+v) = %v, want ErrInvalid", tt.u, err)
		}
	}
}

func TestFileName(t *testing.T) {
	if got := fileName(6_000_000); got != "00000000000006000000" {
		t.Fatalf("fileName = %q", got)
	}
	for _, tt := range []struct {
		name string
		v    int64
		ok   bool
	}{
		{"00000000000006000000", 6_000_000, true},
		{"0", 0, true},
		{"", 0, false},
		{"00000000000006000000.tmp", 0, false},
		{"-1", 0, false},
		{"99999999999999999999", 0, false},
	} {
		v, ok := parseFileName(tt.name)
		if ok != tt.ok || v != tt.v {
			t.Errorf("parseFileName(%q) = %d, %v", tt.name, v, ok)
		}
	}
}
