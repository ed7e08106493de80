package remoting

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	got, err := ParseProperties([]byte("# comment\n! other comment\n\n a = 1 \nb:two\r\nc=\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "1", "b": "two", "c": ""}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"novalue", "=v", "a=b\\\nc"} {
		if _, err := ParseProperties([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestConfigAllowListEmptyRefusesEverything(t *testing.T) {
	a := NewConfigAllowList("NameServer")
	for _, body := range []string{
		"kvConfigPath=/etc/cron.d/x",
		"configStorePath=/tmp/evil.properties",
		"rocketmqHome=/tmp",
		"configBlackList=",
		"orderMessageEnable=true",
	} {
		_, err := a.Update([]byte(body))
		if err == nil {
			t.Fatalf("%q accepted", body)
		}
		key, _, _ := strings.Cut(body, "=")
		if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "no key of the NameServer's configuration may be changed") {
			t.Errorf("%q: %v does not name the key and the allowed ones", body, err)
		}
	}
	// Nothing to change is no error.
	if keys, err := a.Update(nil); err != nil || len(keys) != 0 {
		t.Fatalf("empty update: %v %v", keys, err)
	}
}

func TestConfigAllowListAppliesAllOrNothing(t *testing.T) {
	var applied []string
	a := NewConfigAllowList("broker",
		ConfigKey{Name: "maxMessageSize", Check: func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1024 {
				return errors.New("want an integer ≥ 1024")
			}
			return nil
		}, Apply: func(v string) { applied = append(applied, "maxMessageSize="+v) }},
		ConfigKey{Name: "traceOn", Apply: func(v string) { applied = append(applied, "traceOn="+v) }},
	)
	if got := a.Allowed(); !reflect.DeepEqual(got, []string{"maxMessageSize", "traceOn"}) {
		t.Fatalf("allowed %v", got)
	}
	// A path key next to allowed ones: refused as a whole, nothing applied,
	// the message names the refused key and the allowed ones.
	_, err := a.Update([]byte("traceOn=true\nstorePathRootDir=/tmp/x\nmaxMessageSize=4096"))
	if err == nil || len(applied) != 0 {
		t.Fatalf("update with a path key: err %v, applied %v", err, applied)
	}
	if msg := err.Error(); !strings.Contains(msg, "storePathRootDir may not be changed") || !strings.Contains(msg, "maxMessageSize, traceOn") {
		t.Fatalf("message %q", msg)
	}
	// A bad value: refused as a whole.
	if _, err := a.Update([]byte("traceOn=true\nmaxMessageSize=1")); err == nil || len(applied) != 0 || !strings.Contains(err.Error(), "maxMessageSize=1") {
		t.Fatalf("bad value: err %v, applied %v", err, applied)
	}
	// Allowed keys and good values: applied in key order.
	keys, err := a.Update([]byte("traceOn=false\nmaxMessageSize=4096\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(keys, []string{"maxMessageSize", "traceOn"}) ||
		!reflect.DeepEqual(applied, []string{"maxMessageSize=4096", "traceOn=false"}) {
		t.Fatalf("keys %v applied %v", keys, applied)
	}
}

func TestEncodePropertiesRoundTrip(t *testing.T) {
	in := map[string]string{"b": "2", "a": "1", "c": ""}
	body := EncodeProperties(in)
	if string(body) != "a=1\nb=2\nc=\n" {
		t.Fatalf("body %q", body)
	}
	out, err := ParseProperties(body)
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip %v %v", out, err)
	}
}

func TestConfigAllowListWithApply(t *testing.T) {
	var got []map[string]string
	fail := false
	a := NewConfigAllowList("broker",
		ConfigKey{Name: "maxMessageSize", Check: func(v string) error {
			if _, err := strconv.Atoi(v); err != nil {
				return errors.New("not a number")
			}
			return nil
		}},
		ConfigKey{Name: "deleteWhen"},
	).WithApply(func(props map[string]string) error {
		if fail {
			return errors.New("store refused")
		}
		got = append(got, props)
		return nil
	})
	// Refusals are told apart with errors.Is and apply is not called.
	if _, err := a.Update([]byte("storePathRootDir=/tmp\nmaxMessageSize=4096")); !errors.Is(err, ErrConfigKeyRefused) ||
		errors.Is(err, ErrConfigValueRefused) || !strings.HasSuffix(err.Error(), "deleteWhen, maxMessageSize") {
		t.Fatalf("path key: %v", err)
	}
	if _, err := a.Update([]byte("maxMessageSize=big")); !errors.Is(err, ErrConfigValueRefused) || errors.Is(err, ErrConfigKeyRefused) {
		t.Fatalf("bad value: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("applied after refusals: %v", got)
	}
	// One call with the whole update.
	keys, err := a.Update([]byte("maxMessageSize=4096\ndeleteWhen=04"))
	if err != nil || !reflect.DeepEqual(keys, []string{"deleteWhen", "maxMessageSize"}) ||
		!reflect.DeepEqual(got, []map[string]string{{"maxMessageSize": "4096", "deleteWhen": "04"}}) {
		t.Fatalf("update: keys %v err %v applied %v", keys, err, got)
	}
	// The daemon's refusal is returned as it is.
	fail = true
	if _, err := a.Update([]byte("deleteWhen=05")); err == nil || err.Error() != "store refused" {
		t.Fatalf("apply error: %v", err)
	}
	// Nothing to change calls nothing.
	if keys, err := a.Update([]byte("# nothing\n")); err != nil || len(keys) != 0 {
		t.Fatalf("empty: %v %v", keys, err)
	}
}
