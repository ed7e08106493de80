package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/fsutil"
)

// The broker's configuration as RocketMQ's tools see it (getBrokerConfig,
// updateBrokerConfig): every setting under RocketMQ's key name where one
// exists, and an allow-list of the keys the broker can truly apply while
// it runs. A change is checked as a whole, written to
// <store>/config/runtime.json (atomically) and then applied; at the next
// start the file is applied over the flags, each override logged.

// ConfigEntry is one setting: its value in effect, the compiled-in
// default, what it means, and whether UpdateConfig may change it.
type ConfigEntry struct {
	Key, Value, Default, Description string
	Runtime                          bool
}

// configKey describes one setting. value reads it from options; set (the
// runtime keys only) checks a new value and writes it into options.
type configKey struct {
	name, desc string
	value      func(o *Options) string
	set        func(o *Options, v string) error
}

// Broker permission values of brokerPermission (RocketMQ's PermName): read
// and write, or read only (its write permission taken away).
const (
	brokerPermReadWrite = PermRead | PermWrite
	brokerPermReadOnly  = PermRead
)

// RuntimeConfigFile is where runtime configuration changes are kept,
// under the store directory.
const RuntimeConfigFile = "config/runtime.json"

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// parseInt parses a whole number in [lo, hi].
func parseInt(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number", v)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d is not in %d..%d", n, lo, hi)
	}
	return n, nil
}

// deleteWhenText writes delete hours as RocketMQ's deleteWhen ("04", or
// "04;05" for several).
func deleteWhenText(hours []int) string {
	parts := make([]string, len(hours))
	for i, h := range hours {
		parts[i] = fmt.Sprintf("%02d", h)
	}
	return strings.Join(parts, ";")
}

func parseDeleteWhen(v string) ([]int, error) {
	var hours []int
	for p := range strings.SplitSeq(v, ";") {
		h, err := parseInt(p, 0, 23)
		if err != nil {
			return nil, fmt.Errorf("deleteWhen takes hours 00..23 separated by ';': %w", err)
		}
		if !slices.Contains(hours, int(h)) {
			hours = append(hours, int(h))
		}
	}
	slices.Sort(hours)
	return hours, nil
}

// effectivePermission is brokerPermission with 0 (unset) read as read and
// write.
func (o *Options) effectivePermission() int32 {
	if o.BrokerPermission == 0 {
		return brokerPermReadWrite
	}
	return o.BrokerPermission
}

// brokerRole is RocketMQ's brokerRole of the options.
func (o *Options) brokerRole() string {
	switch {
	case o.Replication.ControllerMode():
		return "CONTROLLER_MODE"
	case o.BrokerID > 0:
		return "SLAVE"
	case o.Replication.Mode == ReplicationSync:
		return "SYNC_MASTER"
	}
	return "ASYNC_MASTER"
}

// maxMessageSizeCap is the largest maxMessageSize the store's segments
// hold (a record must fit in one segment).
func (o *Options) maxMessageSizeCap() int64 {
	return int64(o.Store.CommitLog.MaxRecordSize() - 64<<10)
}

// configKeys are the broker's settings, in the order listed.
var configKeys = []configKey{
	{name: "brokerClusterName", desc: "Cluster the broker belongs to",
		value: func(o *Options) string { return o.Cluster }},
	{name: "brokerName", desc: "Broker group name (master and slaves share it)",
		value: func(o *Options) string { return o.BrokerName }},
	{name: "brokerId", desc: "0 for the master of the group, > 0 for a slave (controller mode: the permanent replica id)",
		value: func(o *Options) string { return itoa(o.BrokerID) }},
	{name: "brokerRole", desc: "ASYNC_MASTER, SYNC_MASTER, SLAVE, or CONTROLLER_MODE (the controllers choose the role)",
		value: func(o *Options) string { return o.brokerRole() }},
	{name: "listenPort", desc: "Client port (bolide.v1, frames, remoting and RocketMQ 5 share it)",
		value: func(o *Options) string {
			if _, port, err := net.SplitHostPort(o.ListenAddr); err == nil {
				return port
			}
			return o.ListenAddr
		}},
	{name: "namesrvAddr", desc: "NameServers the broker registers with, ';'-separated",
		value: func(o *Options) string { return strings.Join(o.NameServers, ";") }},
	{name: "storePathRootDir", desc: "Store directory (CommitLog, queues, index, config)",
		value: func(o *Options) string { return o.StoreDir }},
	{name: "flushDiskType", desc: "ASYNC_FLUSH (flush every flushIntervalCommitLog) or SYNC_FLUSH (acknowledge after fdatasync, group commit)",
		value: func(o *Options) string {
			if o.Store.CommitLog.FlushMode == commitlog.FlushSync {
				return "SYNC_FLUSH"
			}
			return "ASYNC_FLUSH"
		}},
	{name: "flushIntervalCommitLog", desc: "Async flush period, milliseconds",
		value: func(o *Options) string { return itoa(o.Store.CommitLog.FlushInterval.Milliseconds()) }},
	{name: "mappedFileSizeCommitLog", desc: "CommitLog segment size, bytes",
		value: func(o *Options) string { return itoa(o.Store.CommitLog.SegmentSize) }},
	{name: "diskFullRatio", desc: "Disk usage (0..1) above which sends are refused (DISK_FULL)",
		value: func(o *Options) string { return strconv.FormatFloat(o.Store.CommitLog.DiskFullRatio, 'f', -1, 64) }},
	{name: "fileReservedTime", desc: "Hours a CommitLog segment is kept before retention may delete it",
		value: func(o *Options) string { return itoa(int64(o.Store.Retention.MaxAge / time.Hour)) },
		set: func(o *Options, v string) error {
			n, err := parseInt(v, 1, 24*365*10)
			if err != nil {
				return err
			}
			o.Store.Retention.MaxAge = time.Duration(n) * time.Hour
			return nil
		}},
	{name: "deleteWhen", desc: "Local hours in which expired segments are deleted (\"04\", or \"04;16\")",
		value: func(o *Options) string { return deleteWhenText(o.Store.Retention.DeleteHours) },
		set: func(o *Options, v string) error {
			hours, err := parseDeleteWhen(v)
			if err != nil {
				return err
			}
			o.Store.Retention.DeleteHours = hours
			return nil
		}},
	{name: "diskMaxUsedSpaceRatio", desc: "Disk usage, percent, above which expired segments are deleted at any hour",
		value: func(o *Options) string {
			return strconv.FormatInt(int64(math.Round(o.Store.Retention.HighWaterRatio*100)), 10)
		},
		set: func(o *Options, v string) error {
			n, err := parseInt(v, 10, 95)
			if err != nil {
				return err
			}
			o.Store.Retention.HighWaterRatio = float64(n) / 100
			return nil
		}},
	{name: "maxMessageSize", desc: "Largest message body accepted, bytes",
		value: func(o *Options) string { return itoa(int64(o.MaxMessageSize)) },
		set: func(o *Options, v string) error {
			n, err := parseInt(v, 1024, o.maxMessageSizeCap())
			if err != nil {
				return fmt.Errorf("%w (the upper bound is what a %d-byte CommitLog segment holds)", err, o.Store.CommitLog.SegmentSize)
			}
			o.MaxMessageSize = int(n)
			return nil
		}},
	{name: "brokerPermission", desc: "6 read and write; 4 read only: producers are routed elsewhere and sends refused (draining); consumption goes on",
		value: func(o *Options) string { return itoa(int64(o.effectivePermission())) },
		set: func(o *Options, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || (n != int(brokerPermReadWrite) && n != int(brokerPermReadOnly)) {
				return fmt.Errorf("%q is not 6 (read and write) or 4 (read only)", v)
			}
			o.BrokerPermission = int32(n)
			return nil
		}},
	{name: "maxReconsumeTimes", desc: "Deliveries of a failed message before it goes to the group's dead-letter topic (groups may set their own)",
		value: func(o *Options) string { return itoa(int64(o.Retry.MaxReconsumeTimes)) },
		set: func(o *Options, v string) error {
			n, err := parseInt(v, 0, 1000)
			if err != nil {
				return err
			}
			o.Retry.MaxReconsumeTimes = int(n)
			return nil
		}},
	{name: "transactionTimeOut", desc: "Milliseconds after a half message is stored before its first check-back",
		value: func(o *Options) string { return itoa(o.Transaction.Timeout.Milliseconds()) }},
	{name: "transactionCheckInterval", desc: "Milliseconds between two check-backs of a half message",
		value: func(o *Options) string { return itoa(o.Transaction.CheckInterval.Milliseconds()) }},
	{name: "transactionCheckMax", desc: "Check-backs a half message gets before it is discarded",
		value: func(o *Options) string { return itoa(int64(o.Transaction.CheckMax)) }},
	{name: "autoCreateTopicEnable", desc: "Create an unknown topic on its first send",
		value: func(o *Options) string { return strconv.FormatBool(o.AutoCreateTopic) }},
	{name: "defaultTopicQueueNums", desc: "Queues of an automatically created topic",
		value: func(o *Options) string { return itoa(int64(o.DefaultQueueNums)) }},
	{name: "registerNameServerPeriod", desc: "Milliseconds between two registrations with the NameServers",
		value: func(o *Options) string { return itoa(o.RegisterInterval.Milliseconds()) }},
	{name: "enablePropertyFilter", desc: "Consumers may subscribe with SQL92 conditions over properties",
		value: func(o *Options) string { return strconv.FormatBool(o.EnablePropertyFilter) }},
	{name: "longPollingMaxMillis", desc: "Longest a pull is held waiting for messages, milliseconds",
		value: func(o *Options) string { return itoa(o.LongPollMax.Milliseconds()) }},
	{name: "brokerHaMode", desc: "Replication: async, or sync (a send waits for inSyncReplicas slaves)",
		value: func(o *Options) string { return o.Replication.Mode }},
	{name: "inSyncReplicas", desc: "Slaves that must hold a message before a sync-replicated send is acknowledged",
		value: func(o *Options) string { return itoa(int64(o.Replication.InSyncReplicas)) }},
}

// configKeyByName finds a key.
func configKeyByName(name string) (configKey, bool) {
	for _, k := range configKeys {
		if k.name == name {
			return k, true
		}
	}
	return configKey{}, false
}

// RuntimeConfigKeys returns the keys UpdateConfig accepts, sorted.
func RuntimeConfigKeys() []string {
	var out []string
	for _, k := range configKeys {
		if k.set != nil {
			out = append(out, k.name)
		}
	}
	slices.Sort(out)
	return out
}

// CheckConfigValue checks one key and value as UpdateConfig would against
// the broker's current configuration: an error says why it is refused.
func (b *Broker) CheckConfigValue(key, value string) error {
	k, ok := configKeyByName(key)
	if !ok || k.set == nil {
		return refusedKey(key)
	}
	b.cfgMu.Lock()
	o := b.cfg
	b.cfgMu.Unlock()
	return k.set(&o, value)
}

func refusedKey(key string) error {
	return errcode.Errorf(errcode.InvalidParameter, "%s may not be changed at runtime; keys the broker accepts at runtime: %s",
		key, strings.Join(RuntimeConfigKeys(), ", "))
}

// Config lists the broker's settings as they are in effect.
func (b *Broker) Config() []ConfigEntry {
	b.cfgMu.Lock()
	cur := b.cfg
	b.cfgMu.Unlock()
	cur.ListenAddr = b.addr // the bound (or advertised) address, not ":0"
	def := DefaultOptions(b.opts.StoreDir)
	out := make([]ConfigEntry, 0, len(configKeys))
	for _, k := range configKeys {
		out = append(out, ConfigEntry{Key: k.name, Value: k.value(&cur), Default: k.value(&def),
			Description: k.desc, Runtime: k.set != nil})
	}
	return out
}

// UpdateConfig changes runtime settings, all or none: every key must be in
// the allow-list (RuntimeConfigKeys) and every value pass its check,
// otherwise INVALID_PARAMETER names the refused key and nothing changes.
// The changes are written to <store>/config/runtime.json before they are
// applied, and applied over the flags at the next start. It returns the
// entries of the keys given, as now in effect.
func (b *Broker) UpdateConfig(kv map[string]string) ([]ConfigEntry, error) {
	if len(kv) == 0 {
		return nil, errcode.Errorf(errcode.InvalidParameter, "no setting to change")
	}
	keys := slices.Sorted(maps.Keys(kv))
	for _, key := range keys {
		if k, ok := configKeyByName(key); !ok || k.set == nil {
			return nil, refusedKey(key)
		}
	}
	b.cfgMu.Lock()
	defer b.cfgMu.Unlock()
	next := b.cfg
	next.Store.Retention.DeleteHours = slices.Clone(next.Store.Retention.DeleteHours)
	for _, key := range keys {
		k, _ := configKeyByName(key)
		if err := k.set(&next, kv[key]); err != nil {
			return nil, errcode.Errorf(errcode.InvalidParameter, "%s=%s refused, nothing changed: %v", key, kv[key], err)
		}
	}
	saved := maps.Clone(b.cfgSaved)
	if saved == nil {
		saved = make(map[string]string)
	}
	for _, key := range keys {
		k, _ := configKeyByName(key)
		saved[key] = k.value(&next)
	}
	if err := writeRuntimeConfig(b.opts.StoreDir, saved); err != nil {
		return nil, errcode.Errorf(errcode.SystemError, "configuration not changed: %v", err)
	}
	prev := b.cfg
	b.cfg, b.cfgSaved = next, saved
	b.applyConfig(&prev, &next)
	out := make([]ConfigEntry, 0, len(keys))
	def := DefaultOptions(b.opts.StoreDir)
	for _, key := range keys {
		k, _ := configKeyByName(key)
		out = append(out, ConfigEntry{Key: key, Value: k.value(&next), Default: k.value(&def), Description: k.desc, Runtime: true})
		b.log.Info("broker configuration changed", zap.String("key", key), zap.String("from", k.value(&prev)),
			zap.String("to", k.value(&next)))
	}
	return out, nil
}

// applyConfig puts the runtime settings of next into effect; b.cfgMu is
// held.
func (b *Broker) applyConfig(prev, next *Options) {
	b.maxMessageSize.Store(int64(next.MaxMessageSize))
	b.retry.SetMaxReconsumeTimes(next.Retry.MaxReconsumeTimes)
	if err := b.store.SetRetention(next.Store.Retention); err != nil { // checked by set
		b.log.Error("retention policy not applied", zap.Error(err))
	}
	if perm := next.effectivePermission(); perm != prev.effectivePermission() {
		b.brokerPerm.Store(perm)
		// A new topic data version makes the NameServers take the masked
		// (or restored) permissions at the registration that follows at
		// once (RocketMQ bumps it too).
		if err := b.topics.bumpVersion(); err != nil {
			b.log.Warn("topic data version not persisted", zap.Error(err))
		}
		b.reg.trigger()
		b.log.Info("broker permission changed", zap.Int32("permission", perm), zap.Bool("writable", perm&PermWrite != 0))
	}
}

// loadRuntimeConfig reads <store>/config/runtime.json, applies it over
// opts (logging each override) and returns what it holds. A key that is
// no longer a runtime key, or a value that no longer passes its check, is
// skipped with a warning; a file that cannot be read or parsed fails the
// start, naming it.
func loadRuntimeConfig(opts *Options, log *zap.Logger) (map[string]string, error) {
	path := filepath.Join(opts.StoreDir, RuntimeConfigFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("broker: runtime configuration: %w", err)
	}
	saved := map[string]string{}
	if err := json.Unmarshal(data, &saved); err != nil {
		return nil, fmt.Errorf("broker: runtime configuration %s is not a JSON object of strings: %w", path, err)
	}
	for _, key := range slices.Sorted(maps.Keys(saved)) {
		k, ok := configKeyByName(key)
		if !ok || k.set == nil {
			log.Warn("runtime configuration key ignored: not a runtime key", zap.String("file", path), zap.String("key", key))
			delete(saved, key)
			continue
		}
		flag := k.value(opts)
		if err := k.set(opts, saved[key]); err != nil {
			log.Warn("runtime configuration value ignored", zap.String("file", path), zap.String("key", key),
				zap.String("value", saved[key]), zap.Error(err))
			delete(saved, key)
			continue
		}
		if v := k.value(opts); v != flag {
			log.Info("runtime configuration overrides the flags", zap.String("key", key), zap.String("flags", flag),
				zap.String("value", v), zap.String("file", path))
		}
	}
	return saved, nil
}

func writeRuntimeConfig(storeDir string, saved map[string]string) error {
	data, err := json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(storeDir, RuntimeConfigFile), append(data, '\n'), 0o644)
}
