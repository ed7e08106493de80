package remoting

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Runtime configuration over the wire (UPDATE_BROKER_CONFIG 25,
// UPDATE_NAMESRV_CONFIG 318) is an explicit allow-list: a request may
// change only keys a daemon names as safe to change while it runs, each
// with a check of its value. Everything else is refused as a whole,
// nothing applied: paths (storePathRootDir, kvConfigPath, configStorePath,
// rocketmqHome — the keys of CVE-2023-33246 and CVE-2023-37582), the
// configuration's own location, and every key the daemon does not list.
// The list is what a daemon passes to NewConfigAllowList; it may be empty.
// A daemon whose keys must change together (checked, persisted and applied
// as one, like the broker's runtime configuration) gives the list one
// apply function with WithApply instead of an Apply per key.

// ErrConfigKeyRefused marks a refusal because a key may not be changed at
// runtime (RocketMQ answers its black list NO_PERMISSION);
// ErrConfigValueRefused one because a value does not pass its key's check.
var (
	ErrConfigKeyRefused   = errors.New("configuration key may not be changed at runtime")
	ErrConfigValueRefused = errors.New("configuration value refused")
)

// ConfigKey is one key that may be changed at runtime.
type ConfigKey struct {
	// Name is the key as RocketMQ's tools write it.
	Name string
	// Check validates a value (nil: any value); it returns why a value is
	// refused.
	Check func(value string) error
	// Apply puts a checked value into effect.
	Apply func(value string)
}

// ConfigAllowList holds the keys of one daemon that may be changed at
// runtime.
type ConfigAllowList struct {
	daemon string
	keys   map[string]ConfigKey
	names  []string // sorted, for messages
	// apply, when set, applies a whole checked update at once (WithApply).
	apply func(props map[string]string) error
}

// NewConfigAllowList returns the allow-list of daemon ("broker",
// "NameServer"), named in refusals.
func NewConfigAllowList(daemon string, keys ...ConfigKey) *ConfigAllowList {
	a := &ConfigAllowList{daemon: daemon, keys: make(map[string]ConfigKey, len(keys))}
	for _, k := range keys {
		a.keys[k.Name] = k
		a.names = append(a.names, k.Name)
	}
	slices.Sort(a.names)
	return a
}

// WithApply makes Update hand every checked update, whole, to apply (the
// keys' own Apply functions are then not called): the daemon applies all
// of it or, returning an error, none. It returns a.
func (a *ConfigAllowList) WithApply(apply func(props map[string]string) error) *ConfigAllowList {
	a.apply = apply
	return a
}

// Allowed returns the names of the keys that may be changed, sorted.
func (a *ConfigAllowList) Allowed() []string { return slices.Clone(a.names) }

// allowedText names the keys that may be changed, for a refusal.
func (a *ConfigAllowList) allowedText() string {
	if len(a.names) == 0 {
		return "no key of the " + a.daemon + "'s configuration may be changed at runtime: change its flags or configuration file and restart it"
	}
	return "keys the " + a.daemon + " accepts at runtime: " + strings.Join(a.names, ", ")
}

// Check parses an update's body (Java properties text, as mqadmin
// updateBrokerConfig / updateNamesrvConfig send it) and returns its
// key-value pairs when every key is allowed and every value passes its
// check. Otherwise the error names the refused keys and the allowed ones;
// the caller applies nothing. A refused key's error wraps
// ErrConfigKeyRefused, a refused value's ErrConfigValueRefused.
func (a *ConfigAllowList) Check(body []byte) (map[string]string, error) {
	props, err := ParseProperties(body)
	if err != nil {
		return nil, err
	}
	var refused, bad []string
	for k, v := range props {
		ck, ok := a.keys[k]
		switch {
		case !ok:
			refused = append(refused, k)
		case ck.Check != nil:
			if err := ck.Check(v); err != nil {
				bad = append(bad, fmt.Sprintf("%s=%s: %v", k, v, err))
			}
		}
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		return nil, &configError{kind: ErrConfigKeyRefused, msg: fmt.Sprintf(
			"configuration update refused, nothing changed: %s may not be changed at runtime; %s",
			strings.Join(refused, ", "), a.allowedText())}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return nil, &configError{kind: ErrConfigValueRefused,
			msg: "configuration update refused, nothing changed: " + strings.Join(bad, "; ")}
	}
	return props, nil
}

// configError is a refusal of Check: its message says all, kind is what
// errors.Is matches.
type configError struct {
	kind error
	msg  string
}

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return e.kind }

// Update checks an update's body (Check) and, when all of it is allowed,
// applies every value (with the list's apply function when it has one,
// whose error it returns as it is); it returns the keys changed, sorted.
func (a *ConfigAllowList) Update(body []byte) ([]string, error) {
	props, err := a.Check(body)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if a.apply != nil {
		if len(props) == 0 {
			return keys, nil
		}
		if err := a.apply(props); err != nil {
			return nil, err
		}
		return keys, nil
	}
	for _, k := range keys {
		if apply := a.keys[k].Apply; apply != nil {
			apply(props[k])
		}
	}
	return keys, nil
}

// ParseProperties reads Java properties text as RocketMQ's
// MixAll.string2Properties gets it from its tools: one key=value (or
// key:value) a line, # and ! comments, blank lines ignored, keys and
// values trimmed. Line continuations and escapes, which the tools never
// write, are refused rather than guessed at.
func ParseProperties(body []byte) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 4096), len(body)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		if strings.ContainsRune(line, '\\') {
			return nil, fmt.Errorf("configuration line %d: escapes and continuations are not accepted", n)
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("configuration line %d: want key=value", n)
		}
		props[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return props, nil
}

// EncodeProperties writes props as properties text, one key=value a line
// in key order (GET_BROKER_CONFIG's and GET_NAMESRV_CONFIG's body).
func EncodeProperties(props map[string]string) []byte {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(props[k])
		b.WriteByte('\n')
	}
	return b.Bytes()
}
