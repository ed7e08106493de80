package nameserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// The JSON bodies of the remoting protocol's NameServer answers, in the
// shape RocketMQ's NameServer writes with fastjson: compact, keys in
// alphabetical order, null fields left out, collections never null. See
// doc.go for the shapes and the client decoders they must satisfy.

// rmqQueueData is RocketMQ's QueueData.
type rmqQueueData struct {
	BrokerName     string `json:"brokerName"`
	Perm           int32  `json:"perm"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	TopicSysFlag   int32  `json:"topicSysFlag"`
	WriteQueueNums int32  `json:"writeQueueNums"`
}

// rmqBrokerData is RocketMQ's BrokerData.
type rmqBrokerData struct {
	BrokerAddrs        brokerAddrs `json:"brokerAddrs"`
	BrokerName         string      `json:"brokerName"`
	Cluster            string      `json:"cluster"`
	EnableActingMaster bool        `json:"enableActingMaster"`
}

// rmqTopicRoute is RocketMQ's TopicRouteData. orderTopicConf is left out
// (null): Bolide keeps no order configuration, and the Go client panics on
// a malformed one. filterServerTable is always {}.
type rmqTopicRoute struct {
	BrokerDatas       []rmqBrokerData     `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
	QueueDatas        []rmqQueueData      `json:"queueDatas"`
}

// rmqClusterInfo is RocketMQ's ClusterInfo.
type rmqClusterInfo struct {
	BrokerAddrTable  map[string]rmqBrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string      `json:"clusterAddrTable"`
}

// rmqTopicList is RocketMQ's TopicList.
type rmqTopicList struct {
	BrokerAddr string   `json:"brokerAddr,omitempty"`
	TopicList  []string `json:"topicList"`
}

// rmqKVTable is RocketMQ's KVTable.
type rmqKVTable struct {
	Table map[string]string `json:"table"`
}

// brokerAddrs is a group's addresses by broker id. It is written with the
// ids in numeric order, quoted, and without a byte of whitespace: the Go
// client cuts the object's raw text at commas and colons.
type brokerAddrs map[int64]string

func (a brokerAddrs) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, id := range slices.Sorted(maps.Keys(a)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(strconv.FormatInt(id, 10))
		b.WriteString(`":`)
		v, err := marshalJSON(a[id])
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func toRMQBrokerData(b BrokerData) rmqBrokerData {
	addrs := brokerAddrs(b.Addrs)
	if addrs == nil {
		addrs = brokerAddrs{}
	}
	return rmqBrokerData{BrokerAddrs: addrs, BrokerName: b.BrokerName, Cluster: b.Cluster}
}

// encodeRoute is a route as RocketMQ's TopicRouteData JSON.
func encodeRoute(rt Route) ([]byte, error) {
	out := rmqTopicRoute{
		BrokerDatas:       make([]rmqBrokerData, 0, len(rt.Brokers)),
		FilterServerTable: map[string][]string{},
		QueueDatas:        make([]rmqQueueData, 0, len(rt.Queues)),
	}
	for _, b := range rt.Brokers {
		out.BrokerDatas = append(out.BrokerDatas, toRMQBrokerData(b))
	}
	for _, q := range rt.Queues {
		out.QueueDatas = append(out.QueueDatas, rmqQueueData{
			BrokerName: q.BrokerName, Perm: q.Perm, ReadQueueNums: q.ReadQueues,
			TopicSysFlag: q.SysFlag, WriteQueueNums: q.WriteQueues,
		})
	}
	return marshalJSON(out)
}

// encodeClusterInfo is the broker side of the table as RocketMQ's
// ClusterInfo JSON.
func encodeClusterInfo(ci ClusterInfo) ([]byte, error) {
	out := rmqClusterInfo{
		BrokerAddrTable:  make(map[string]rmqBrokerData, len(ci.Brokers)),
		ClusterAddrTable: make(map[string][]string, len(ci.Clusters)),
	}
	for name, b := range ci.Brokers {
		out.BrokerAddrTable[name] = toRMQBrokerData(b)
	}
	for c, names := range ci.Clusters {
		out.ClusterAddrTable[c] = append([]string{}, names...)
	}
	return marshalJSON(out)
}

// encodeTopicList is RocketMQ's TopicList JSON; brokerAddr is left out
// when empty.
func encodeTopicList(topics []string, brokerAddr string) ([]byte, error) {
	if topics == nil {
		topics = []string{}
	}
	return marshalJSON(rmqTopicList{BrokerAddr: brokerAddr, TopicList: topics})
}

// encodeKVTable is RocketMQ's KVTable JSON.
func encodeKVTable(table map[string]string) ([]byte, error) {
	if table == nil {
		table = map[string]string{}
	}
	return marshalJSON(rmqKVTable{Table: table})
}

// marshalJSON is json.Marshal without HTML escaping, as fastjson writes.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("nameserver: remoting body: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
