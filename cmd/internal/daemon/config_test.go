package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type testFlags struct {
	fs       *pflag.FlagSet
	config   string
	listen   string
	timeout  time.Duration
	scan     time.Duration
	seeds    []string
	level    string
	verbose  bool
	untouchd string
}

func newTestFlags() *testFlags {
	f := &testFlags{fs: pflag.NewFlagSet("test", pflag.ContinueOnError)}
	f.fs.StringVar(&f.config, "config", "", "")
	f.fs.StringVar(&f.listen, "listen", "127.0.0.1:9876", "")
	f.fs.DurationVar(&f.timeout, "broker-timeout", 2*time.Minute, "")
	f.fs.DurationVar(&f.scan, "scan-interval", 10*time.Second, "")
	f.fs.StringSliceVar(&f.seeds, "gossip-seeds", nil, "")
	f.fs.StringVar(&f.level, "log-level", "info", "")
	f.fs.BoolVar(&f.verbose, "verbose", false, "")
	f.fs.StringVar(&f.untouchd, "untouched", "dflt", "")
	return f
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bolide.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigPrecedence(t *testing.T) {
	path := writeFile(t, `
listen: 10.0.0.1:1
broker-timeout: 1m
scan_interval: 3s        # underscores work too
gossip-seeds: [10.0.0.1:7946, 10.0.0.2:7946]
Log-Level: debug         # keys are case insensitive
verbose: true
`)
	t.Setenv("BOLIDE_LISTEN", "10.0.0.2:2")
	t.Setenv("BOLIDE_BROKER_TIMEOUT", "45s")
	t.Setenv("BOLIDE_UNTOUCHED", "") // empty counts as unset
	f := newTestFlags()
	if err := f.fs.Parse([]string{"--listen", "10.0.0.3:3"}); err != nil {
		t.Fatal(err)
	}
	c := NewConfig(f.fs, EnvPrefix, "config")
	if err := c.Load(path); err != nil {
		t.Fatal(err)
	}
	if f.listen != "10.0.0.3:3" || f.timeout != 45*time.Second || f.scan != 3*time.Second ||
		!reflect.DeepEqual(f.seeds, []string{"10.0.0.1:7946", "10.0.0.2:7946"}) || f.level != "debug" ||
		!f.verbose || f.untouchd != "dflt" {
		t.Fatalf("resolved %+v", *f)
	}
	want := map[string]string{
		"listen": SourceFlag, "broker-timeout": SourceEnv, "scan-interval": SourceFile,
		"gossip-seeds": SourceFile, "log-level": SourceFile, "verbose": SourceFile, "untouched": SourceDefault,
	}
	for name, src := range want {
		if got := c.Source(name); got != src {
			t.Errorf("source of %s = %q, want %q", name, got, src)
		}
	}
	if eff := c.Effective(); eff["broker-timeout"] != "45s" || eff["listen"] != "10.0.0.3:3" {
		t.Errorf("effective %v", eff)
	}
	if _, ok := c.Effective()["config"]; ok {
		t.Error("the config flag is listed as a setting")
	}
	if len(c.LogFields()) != len(c.Effective())+1 {
		t.Error("log fields")
	}
}

func TestConfigEnvListAndNoFile(t *testing.T) {
	t.Setenv("BOLIDE_GOSSIP_SEEDS", "a:1,b:2")
	f := newTestFlags()
	c := NewConfig(f.fs, EnvPrefix, "config")
	if err := c.Load(""); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.seeds, []string{"a:1", "b:2"}) || f.listen != "127.0.0.1:9876" {
		t.Fatalf("resolved %+v", *f)
	}
}

func TestConfigErrorsNameTheSetting(t *testing.T) {
	cases := []struct {
		name string
		file string
		env  [2]string
		want []string
	}{
		{"unknown key", "listen: x:1\nbrokr-timeout: 1s\n", [2]string{}, []string{`unknown key "brokr-timeout"`, "broker-timeout"}},
		{"nested key", "log:\n  level: debug\n", [2]string{}, []string{`unknown key "log"`}},
		{"exempt key", "config: other.yaml\n", [2]string{}, []string{`unknown key "config"`}},
		{"bad duration in file", "broker-timeout: soon\n", [2]string{}, []string{`key "broker-timeout"`, `"soon"`}},
		{"duration without unit", "scan-interval: 10\n", [2]string{}, []string{`key "scan-interval"`}},
		{"bad bool in file", "verbose: maybe\n", [2]string{}, []string{`key "verbose"`}},
		{"bad env", "", [2]string{"BOLIDE_SCAN_INTERVAL", "fast"}, []string{"BOLIDE_SCAN_INTERVAL", "scan-interval"}},
		{"not yaml", "listen: [unclosed\n", [2]string{}, []string{"bolide.yaml"}},
		{"one setting twice", "scan_interval: 1s\nscan-interval: 2s\n", [2]string{},
			[]string{`keys "scan-interval" and "scan_interval" both set scan-interval`}},
		{"bad value of a checked flag in file", "mode: sometimes\n", [2]string{}, []string{`key "mode": invalid value "sometimes": want fast or slow`}},
		{"bad value of a checked flag in env", "", [2]string{"BOLIDE_MODE", "sometimes"}, []string{`BOLIDE_MODE="sometimes": invalid value for mode: want fast or slow`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env[0] != "" {
				t.Setenv(c.env[0], c.env[1])
			}
			path := ""
			if c.file != "" {
				path = writeFile(t, c.file)
			}
			f := newTestFlags()
			var mode string
			CheckedStringVar(f.fs, &mode, "mode", "fast", "", checkMode)
			err := NewConfig(f.fs, EnvPrefix, "config").Load(path)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	f := newTestFlags()
	if err := NewConfig(f.fs, EnvPrefix).Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("missing file accepted")
	}
}

func checkMode(s string) error {
	if s != "fast" && s != "slow" {
		return errors.New("want fast or slow")
	}
	return nil
}

// TestCheckedString: a checked flag refuses a bad value wherever it comes
// from and keeps the good one.
func TestCheckedString(t *testing.T) {
	f := newTestFlags()
	var mode string
	CheckedStringVar(f.fs, &mode, "mode", "fast", "", checkMode)
	if mode != "fast" || f.fs.Lookup("mode").DefValue != "fast" || f.fs.Lookup("mode").Value.Type() != "string" {
		t.Fatalf("default %q", mode)
	}
	err := f.fs.Parse([]string{"--mode", "sometimes"})
	if err == nil || !strings.Contains(err.Error(), `"--mode"`) || !strings.Contains(err.Error(), "want fast or slow") {
		t.Fatalf("flag: %v", err)
	}
	if err := f.fs.Parse([]string{"--mode", "slow"}); err != nil || mode != "slow" {
		t.Fatalf("flag: %q %v", mode, err)
	}
}

func TestCheckHostPort(t *testing.T) {
	for s, ok := range map[string]bool{
		"127.0.0.1:9876": true, ":9876": true, "[::1]:0": true, "broker-a.example:10911": true,
		"banana": false, "127.0.0.1": false, "127.0.0.1:http": false, "127.0.0.1:65536": false, "": false,
	} {
		if err := CheckHostPort(s); (err == nil) != ok {
			t.Errorf("CheckHostPort(%q) = %v", s, err)
		}
	}
	for s, ok := range map[string]bool{"auto": true, "off": true, "": true, "127.0.0.1:10980": true, "everywhere": false} {
		if err := CheckAdminListen(s); (err == nil) != ok {
			t.Errorf("CheckAdminListen(%q) = %v", s, err)
		}
	}
}
