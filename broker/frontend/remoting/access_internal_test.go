package remoting

import (
	"testing"

	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// TestAccessTableCoversEveryHandler: every request code the front end
// serves is classified, and the table names no code it does not serve (a
// stale entry would let a code through that ACL should refuse as
// unknown). Data entries say what they need.
func TestAccessTableCoversEveryHandler(t *testing.T) {
	served := map[int32]bool{}
	for _, hs := range (&Frontend{}).handlerSets() {
		for code := range hs {
			served[code] = true
			if _, ok := accessTable[code]; !ok {
				t.Errorf("request code %d is served but not classified in accessTable", code)
			}
		}
	}
	for code, a := range accessTable {
		if !served[code] {
			t.Errorf("accessTable classifies request code %d (%s), which is not served", code, a.what)
		}
		if (a.class == classData) != (a.needs != nil) {
			t.Errorf("request code %d (%s): class %d with needs %v", code, a.what, a.class, a.needs != nil)
		}
		if a.what == "" {
			t.Errorf("request code %d has no name", code)
		}
	}
}

// TestAccessClasses pins the class of the requests that matter most.
func TestAccessClasses(t *testing.T) {
	for code, want := range map[int32]class{
		rmq.SendMessage: classData, rmq.SendMessageV2: classData, rmq.SendBatchMessage: classData,
		rmq.PullMessage: classData, rmq.HeartBeat: classData, rmq.UpdateConsumerOffset: classData,
		rmq.ConsumerSendMsgBack: classData, rmq.QueryMessage: classData,
		rmq.UpdateAndCreateTopic: classAdmin, rmq.DeleteTopicInBroker: classAdmin,
		rmq.UpdateAndCreateSubscriptionGroup: classAdmin, rmq.DeleteSubscriptionGroup: classAdmin,
		rmq.UpdateBrokerConfig: classAdmin, rmq.InvokeBrokerToResetOffset: classAdmin,
		rmq.GetAllTopicConfig: classRead, rmq.GetBrokerRuntimeInfo: classRead, rmq.ViewMessageByID: classRead,
		rmq.GetBrokerConfig: classRead,
	} {
		if got := accessTable[code].class; got != want {
			t.Errorf("request code %d: class %d, want %d", code, got, want)
		}
	}
}

// TestAccessNeeds: what the data requests need, from their headers and
// bodies.
func TestAccessNeeds(t *testing.T) {
	cases := []struct {
		code int32
		ext  map[string]string
		body string
		want string
	}{
		{rmq.SendMessage, map[string]string{"topic": "T"}, "", "[publish to topic T]"},
		{rmq.SendMessageV2, map[string]string{"b": "T"}, "", "[publish to topic T]"},
		{rmq.SendMessage, map[string]string{"topic": "%RETRY%G"}, "", "[consume as group G]"},
		{rmq.SendMessage, map[string]string{"topic": "RMQ_SYS_TRACE_TOPIC"}, "", "[]"},
		{rmq.PullMessage, map[string]string{"topic": "T", "consumerGroup": "G"}, "", "[subscribe to topic T consume as group G]"},
		{rmq.GetMaxOffset, map[string]string{"topic": "T"}, "", "[publish to or subscribe to topic T]"},
		{rmq.ConsumerSendMsgBack, map[string]string{"group": "G"}, "", "[consume as group G]"},
		{rmq.UnregisterClient, map[string]string{"producerGroup": "P"}, "", "[]"},
		{rmq.HeartBeat, nil, `{"consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T"},{"topic":"%RETRY%G"}]}],"producerDataSet":[{"groupName":"P"}]}`,
			"[consume as group G subscribe to topic T consume as group G]"},
		{rmq.LockBatchMQ, nil, `{"consumerGroup":"G","mqSet":[{"topic":"T","queueId":0},{"topic":"U","queueId":1}]}`,
			"[consume as group G subscribe to topic T subscribe to topic U]"},
	}
	for _, c := range cases {
		req := rmq.NewRequest(c.code, c.ext, []byte(c.body))
		got := accessTable[c.code].needs(req)
		var s []string
		for _, n := range got {
			s = append(s, n.String())
		}
		if g := "[" + join(s) + "]"; g != c.want {
			t.Errorf("code %d %v: needs %s, want %s", c.code, c.ext, g, c.want)
		}
	}
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out
}
