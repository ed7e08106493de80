package message

import (
	"testing"
)

func TestRerouteRestore(t *testing.T) {
	m := &Ext{Message: Message{Topic: "orders", Body: []byte("x"), Properties: map[string]string{"KEYS": "k", PropertyDelayLevel: "3"}},
		QueueID: 5, SysFlag: 8, ReconsumeTimes: 2}
	Reroute(m, ScheduleTopic, 2)
	if m.Topic != ScheduleTopic || m.QueueID != 2 || m.Properties[PropertyRealTopic] != "orders" || m.Properties[PropertyRealQueueID] != "5" {
		t.Fatalf("rerouted: %+v", m)
	}
	r, err := Restore(m, PropertyDelayLevel)
	if err != nil {
		t.Fatal(err)
	}
	if r.Topic != "orders" || r.QueueID != 5 || r.SysFlag != 8 || r.ReconsumeTimes != 2 || string(r.Body) != "x" {
		t.Fatalf("restored: %+v", r)
	}
	if len(r.Properties) != 1 || r.Properties["KEYS"] != "k" {
		t.Fatalf("restored properties %v", r.Properties)
	}
	if m.Properties[PropertyRealTopic] != "orders" {
		t.Fatal("Restore changed its input")
	}
	for _, props := range []map[string]string{
		{},
		{PropertyRealTopic: "t"},
		{PropertyRealTopic: "t", PropertyRealQueueID: "-1"},
		{PropertyRealTopic: "t", PropertyRealQueueID: "x"},
		{PropertyRealTopic: "t", PropertyRealQueueID: "99999999999"},
	} {
		if _, err := Restore(&Ext{Message: Message{Topic: ScheduleTopic, Properties: props}}); err == nil {
			t.Errorf("Restore of %v: no error", props)
		}
	}
}
