package client

import (
	"math/rand/v2"
	"testing"

	"github.com/bolide-mq/bolide/message"
)

// TestWirePropertiesLen: for messages of every shape (user properties
// that the fields replace or not, empty names, the reserved checksum name,
// separator bytes in names, values, tags, keys, sharding keys and unique
// ids), wirePropertiesLen answers as message.ValidPropertiesLen does on the
// map wireProperties builds: the same length, or an error where it errs.
func TestWirePropertiesLen(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 21))
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	value := func() string { return pick("", "v", "a longer value", "bad\x01value", "bad\x02", "日本") }
	names := []string{"", "k", "user-key", message.PropertyTags, message.PropertyKeys, message.PropertyShardingKey,
		message.PropertyUniqueKey, message.PropertyCRC32, "bad\x02name", message.PropertyDelayLevel}
	errs, oks := 0, 0
	for i := range 20000 {
		m := &Message{Tag: pick("", "", "tagA", "bad\x01tag"), ShardingKey: "", UniqueID: pick("", "", "ID-1", "bad\x02id")}
		if n := rng.IntN(4); n > 0 {
			m.Properties = make(map[string]string, n)
			for range n {
				m.Properties[pick(names...)] = value()
			}
		}
		for range rng.IntN(4) {
			m.Keys = append(m.Keys, pick("k1", "key-two", "bad\x01key", "x"))
		}
		shardingKey := pick("", "", "order-7", "bad\x02shard")
		uniqueID := pick("", "0A0B0C0D0E0F101112131415161718191A1B1C1D1E1F2021")
		want, wantErr := message.ValidPropertiesLen(wireProperties(m, shardingKey, uniqueID))
		got, err := wirePropertiesLen(m, shardingKey, uniqueID)
		if (err != nil) != (wantErr != nil) || got != want {
			t.Fatalf("case %d: message %+v, sharding key %q, unique id %q: wirePropertiesLen = %d, %v; the map's = %d, %v",
				i, m, shardingKey, uniqueID, got, err, want, wantErr)
		}
		if err != nil {
			errs++
		} else {
			oks++
		}
	}
	if errs < 1000 || oks < 1000 {
		t.Fatalf("the cases are lopsided: %d refused, %d accepted", errs, oks)
	}
}
