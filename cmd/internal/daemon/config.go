package daemon

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.uber.org/zap"
)

// EnvPrefix starts every Bolide environment variable. The daemons add their
// own name to it, so one environment can hold both daemons' settings
// without a clash: the broker's --listen is BOLIDE_BROKER_LISTEN, the
// NameServer's BOLIDE_NAMESRV_LISTEN.
const EnvPrefix = "BOLIDE"

// The daemons' environment variable prefixes.
const (
	BrokerEnvPrefix     = EnvPrefix + "_BROKER"
	NameServerEnvPrefix = EnvPrefix + "_NAMESRV"
)

// Where a setting came from.
const (
	SourceDefault = "default"
	SourceFile    = "file"
	SourceEnv     = "env"
	SourceFlag    = "flag"
)

// Config layers a command's flags over environment variables over a YAML
// file over the flags' defaults (flag > env > file > default). Every flag is
// a setting: the file uses the flag's name as its key ("broker-timeout:
// 30s"; "broker_timeout" works too) and the environment variable is the
// prefix plus the name in upper case with dashes as underscores. Resolved
// values are written back into the flags, so a main reads its flag
// variables as usual, and a bad value from any source fails with pflag's
// parse error naming the setting and the source.
type Config struct {
	fs      *pflag.FlagSet
	v       *viper.Viper
	prefix  string
	exempt  map[string]bool   // flags that are not settings (help, version, config)
	sources map[string]string // flag name -> Source*
	ignored []string          // set variables of the shared names, see IgnoredEnv
}

// NewConfig binds fs. Flags named in exempt are not settings: they cannot
// be set from the file or the environment.
func NewConfig(fs *pflag.FlagSet, envPrefix string, exempt ...string) *Config {
	c := &Config{
		fs:      fs,
		v:       viper.New(),
		prefix:  envPrefix,
		exempt:  map[string]bool{"help": true, "version": true},
		sources: map[string]string{},
	}
	for _, e := range exempt {
		c.exempt[e] = true
	}
	c.v.SetEnvPrefix(envPrefix)
	c.v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	c.v.AutomaticEnv()
	return c
}

// BindCommand binds a cobra command's flags with a daemon's environment
// prefix (BrokerEnvPrefix, NameServerEnvPrefix); the flag "config", if the
// command has one, names the file and is not itself a setting. Call it in
// RunE (after cobra parsed the flags), then Load.
func BindCommand(cmd *cobra.Command, envPrefix string) *Config {
	return NewConfig(cmd.Flags(), envPrefix, "config")
}

// EnvName is the environment variable of a flag.
func (c *Config) EnvName(flag string) string {
	return envName(c.prefix, flag)
}

func envName(prefix, flag string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// IgnoredEnv lists, after Load, the variables set under the names both
// daemons once shared (BOLIDE_LISTEN for --listen), which a daemon with
// its own prefix does not read; a main logs them so that an old
// environment file does not go unnoticed.
func (c *Config) IgnoredEnv() []string { return c.ignored }

// WarnIgnoredEnv logs IgnoredEnv, if any.
func (c *Config) WarnIgnoredEnv(lg *zap.Logger) {
	if len(c.ignored) > 0 {
		lg.Warn("environment variables not read: this daemon's settings are under its own prefix",
			zap.String("prefix", c.prefix+"_"), zap.Strings("ignored", c.ignored))
	}
}

// cliEnv are variables the CLI (bin/bolide) reads under the shared prefix:
// set for the CLI in the same shell, they are no sign of an old daemon
// environment and are not reported.
var cliEnv = map[string]bool{"BOLIDE_NAMESRV": true, "BOLIDE_ACCESS_KEY": true, "BOLIDE_SECRET_KEY": true,
	"BOLIDE_TLS": true, "BOLIDE_TLS_CA": true, "BOLIDE_TLS_SERVER_NAME": true, "BOLIDE_TLS_CERT": true, "BOLIDE_TLS_KEY": true}

// noteIgnoredEnv fills c.ignored.
func (c *Config) noteIgnoredEnv() {
	c.ignored = nil
	if c.prefix == EnvPrefix {
		return
	}
	own := map[string]bool{}
	for _, name := range c.settingNames() {
		own[c.EnvName(name)] = true
	}
	for _, name := range c.settingNames() {
		old := envName(EnvPrefix, name)
		if os.Getenv(old) != "" && !own[old] && !cliEnv[old] {
			c.ignored = append(c.ignored, fmt.Sprintf("%s (use %s)", old, c.EnvName(name)))
		}
	}
}

// Load reads the YAML file at path ("" for none), rejects keys that are
// not settings, and resolves every flag the command line did not set from
// the environment, then from the file.
func (c *Config) Load(path string) error {
	if err := c.v.BindPFlags(c.fs); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var file map[string]any
	if path != "" {
		var err error
		if file, err = c.readFile(path); err != nil {
			return err
		}
		if err := c.v.MergeConfigMap(file); err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
	}
	c.noteIgnoredEnv()
	var errs []string
	c.fs.VisitAll(func(f *pflag.Flag) {
		if c.exempt[f.Name] {
			return
		}
		if f.Changed {
			c.sources[f.Name] = SourceFlag
			return
		}
		env := c.EnvName(f.Name)
		if val, ok := os.LookupEnv(env); ok && val != "" {
			c.sources[f.Name] = SourceEnv
			if err := c.fs.Set(f.Name, val); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: invalid value for %s: %v", env, val, f.Name, valueError(err)))
			}
			return
		}
		if _, ok := file[f.Name]; ok {
			c.sources[f.Name] = SourceFile
			val := stringify(c.v.Get(f.Name))
			if err := c.fs.Set(f.Name, val); err != nil {
				errs = append(errs, fmt.Sprintf("%s: key %q: invalid value %q: %v", path, f.Name, val, valueError(err)))
			}
			return
		}
		c.sources[f.Name] = SourceDefault
	})
	if len(errs) > 0 {
		return fmt.Errorf("config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// valueError is why a value was refused, without pflag's "invalid
// argument ... for --flag" wrapping: the caller names the variable or key.
func valueError(err error) error {
	var ive *pflag.InvalidValueError
	if errors.As(err, &ive) && ive.Unwrap() != nil {
		return ive.Unwrap()
	}
	return err
}

// readFile reads a YAML file into a map keyed by flag name. Keys are case
// insensitive and may use underscores for dashes; a key that is not a
// setting is an error that names it.
func (c *Config) readFile(path string) (map[string]any, error) {
	fv := viper.New()
	fv.SetConfigFile(path)
	fv.SetConfigType("yaml")
	if err := fv.ReadInConfig(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	out := map[string]any{}
	keys := map[string][]string{} // setting -> the file's keys for it
	var unknown []string
	for key, val := range fv.AllSettings() {
		name := strings.ReplaceAll(strings.ToLower(key), "_", "-")
		if f := c.fs.Lookup(name); f == nil || c.exempt[name] {
			unknown = append(unknown, key)
			continue
		}
		out[name] = val
		keys[name] = append(keys[name], key)
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("config %s: unknown key %q (known: %s)", path, strings.Join(unknown, `", "`),
			strings.Join(c.settingNames(), ", "))
	}
	// "broker_name" and "broker-name" are one setting: a file with both
	// would keep whichever came last, so it is refused.
	var dups []string
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		ks := keys[name]
		if len(ks) < 2 {
			continue
		}
		slices.Sort(ks)
		quoted := make([]string, len(ks))
		for i, k := range ks {
			quoted[i] = strconv.Quote(k)
		}
		all := "all"
		if len(ks) == 2 {
			all = "both"
		}
		dups = append(dups, fmt.Sprintf("keys %s and %s %s set %s: keep one",
			strings.Join(quoted[:len(ks)-1], ", "), quoted[len(ks)-1], all, name))
	}
	if len(dups) > 0 {
		return nil, fmt.Errorf("config %s: %s", path, strings.Join(dups, "; "))
	}
	return out, nil
}

func (c *Config) settingNames() []string {
	var names []string
	c.fs.VisitAll(func(f *pflag.Flag) {
		if !c.exempt[f.Name] {
			names = append(names, f.Name)
		}
	})
	slices.Sort(names)
	return names
}

// stringify renders a YAML value the way the flag would be typed: lists
// are comma-separated.
func stringify(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ",")
	case []string:
		return strings.Join(x, ",")
	}
	return fmt.Sprint(v)
}

// Source tells where a setting's value came from (after Load).
func (c *Config) Source(flag string) string { return c.sources[flag] }

// Effective returns every setting's value as text, by flag name.
func (c *Config) Effective() map[string]string {
	out := map[string]string{}
	c.fs.VisitAll(func(f *pflag.Flag) {
		if !c.exempt[f.Name] {
			out[f.Name] = f.Value.String()
		}
	})
	return out
}

// LogFields are zap fields for the one startup line that records the
// effective configuration and where each value that is not a default came
// from.
func (c *Config) LogFields() []zap.Field {
	set := map[string]string{}
	for name, src := range c.sources {
		if src != SourceDefault {
			set[name] = src
		}
	}
	eff := c.Effective()
	fields := make([]zap.Field, 0, len(eff)+1)
	for _, name := range slices.Sorted(maps.Keys(eff)) {
		v := eff[name]
		if secretSettings[name] && v != "" {
			v = "(set)"
		}
		fields = append(fields, zap.String(name, v))
	}
	return append(fields, zap.Any("sources", set))
}

// RequirePositive fails, naming the setting and where its value came from,
// when one of the named integer or duration settings is not above zero.
func (c *Config) RequirePositive(names ...string) error {
	var errs []string
	for _, name := range names {
		f := c.fs.Lookup(name)
		if f == nil {
			errs = append(errs, fmt.Sprintf("%s: no such setting", name))
			continue
		}
		var positive bool
		switch f.Value.Type() {
		case "duration":
			d, err := c.fs.GetDuration(name)
			positive = err == nil && d > 0
		case "int", "int32", "int64", "uint", "uint32", "uint64":
			n, err := strconv.ParseInt(f.Value.String(), 10, 64)
			positive = err == nil && n > 0
		default:
			errs = append(errs, fmt.Sprintf("%s: not a number", name))
			continue
		}
		if !positive {
			errs = append(errs, fmt.Sprintf("%s must be > 0, not %s%s", name, f.Value.String(), c.from(name)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// from says where a non-default value came from, for error messages.
func (c *Config) from(name string) string {
	switch c.sources[name] {
	case SourceEnv:
		return " (from " + c.EnvName(name) + ")"
	case SourceFile:
		return " (from the config file)"
	case SourceFlag:
		return " (from --" + name + ")"
	}
	return ""
}

// DocTable renders the settings as a Markdown table (key, default,
// environment variable, description), in flag order; docs/config.md holds
// one per daemon and a test keeps them in step with the flags.
func (c *Config) DocTable() string {
	var b strings.Builder
	b.WriteString("| key | default | environment | description |\n|---|---|---|---|\n")
	c.fs.VisitAll(func(f *pflag.Flag) {
		if c.exempt[f.Name] {
			return
		}
		def := f.DefValue
		if def == "[]" {
			def = ""
		}
		if def == "" {
			def = `""`
		} else {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", f.Name, def, c.EnvName(f.Name), strings.ReplaceAll(f.Usage, "|", `\|`))
	})
	return b.String()
}
