package membership

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// Meta keys a daemon puts in its node meta. Others may be added freely.
const (
	MetaAddr       = "addr"        // the daemon's client-facing service address
	MetaCluster    = "cluster"     // a broker's cluster name
	MetaBrokerName = "broker_name" // a broker's group name
	MetaBrokerID   = "broker_id"   // a broker's id in its group (0 = master)
)

// MaxMetaSize is memberlist's limit on a node's encoded meta.
const MaxMetaSize = memberlist.MetaMaxSize

// wireMeta is what travels in memberlist's node meta: JSON, so that a
// human reading a packet capture, or a future version, can make sense of it.
type wireMeta struct {
	Role Role              `json:"r"`
	Meta map[string]string `json:"m,omitempty"`
}

// encodeMeta encodes a role and attributes; it fails when the result does
// not fit in memberlist's meta limit.
func encodeMeta(role Role, meta map[string]string) ([]byte, error) {
	b, err := json.Marshal(wireMeta{Role: role, Meta: meta})
	if err != nil {
		return nil, fmt.Errorf("membership: encode meta: %w", err)
	}
	if len(b) > MaxMetaSize {
		return nil, fmt.Errorf("membership: meta is %d bytes encoded, at most %d", len(b), MaxMetaSize)
	}
	return b, nil
}

// decodeMeta is the reverse of encodeMeta. Nodes that are not Bolide's (or
// send garbage) decode with an error; the caller keeps them with no role.
func decodeMeta(b []byte) (Role, map[string]string, error) {
	if len(b) == 0 {
		return "", nil, nil
	}
	var w wireMeta
	if err := json.Unmarshal(b, &w); err != nil {
		return "", nil, fmt.Errorf("membership: decode meta: %w", err)
	}
	return w.Role, w.Meta, nil
}
