package remoting_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/message"
)

// sendHalf sends a half message as the transactional producers do and
// returns the response.
func sendHalf(t *testing.T, c *rmq.Conn, group, topic, uniq, body string) *rmq.Command {
	t.Helper()
	resp := invoke(t, c, rmq.SendMessage, sendExt(group, topic, 0, int(message.SysFlagTransPrepared),
		props("TRAN_MSG", "true", "PGROUP", group, "UNIQ_KEY", uniq, "TAGS", "tx")), []byte(body))
	if resp.Code != rmq.Success || resp.String("transactionId") != uniq {
		t.Fatalf("half message: %d %q %v", resp.Code, resp.Remark, resp.Ext)
	}
	return resp
}

// endExt is END_TRANSACTION's header for a half message's send response.
func endExt(group string, sent *rmq.Command, kind int, fromCheck bool, bname string) map[string]string {
	_, phys, _ := message.ParseOffsetMsgID(sent.String("msgId"))
	return map[string]string{"producerGroup": group, "tranStateTableOffset": sent.String("queueOffset"),
		"commitLogOffset": strconv.FormatInt(phys, 10), "commitOrRollback": strconv.Itoa(kind),
		"fromTransactionCheck": strconv.FormatBool(fromCheck), "msgId": sent.String("transactionId"),
		"transactionId": sent.String("transactionId"), "bname": bname}
}

func txnBroker(t *testing.T, timeout time.Duration) *server.Server {
	return startBroker(t, func(o *broker.Options) {
		o.Transaction = broker.TransactionOptions{Timeout: timeout, CheckInterval: timeout, CheckMax: 15}
	})
}

func TestEndTransaction(t *testing.T) {
	b := txnBroker(t, time.Minute)
	newTopic(t, b, "pay", 1)
	c := dialBroker(t, b.Addr(), nil)

	commit := sendHalf(t, c, "TXG", "pay", "AAAA0000000000000000000000000001", "commit me")
	rollback := sendHalf(t, c, "TXG", "pay", "AAAA0000000000000000000000000002", "roll me back")
	unknown := sendHalf(t, c, "TXG", "pay", "AAAA0000000000000000000000000003", "not yet")
	if st, _ := b.QueueState("pay", 0); st.MaxOffset != 0 {
		t.Fatalf("half messages visible: %+v", st)
	}
	for _, e := range []map[string]string{
		endExt("TXG", unknown, 0, false, "broker-a"),
		endExt("TXG", rollback, 12, false, "broker-a"),
		endExt("TXG", commit, 8, false, "broker-a"),
	} {
		if resp := invoke(t, c, rmq.EndTransaction, e, nil); resp.Code != rmq.Success {
			t.Fatalf("end %v: %d %q", e, resp.Code, resp.Remark)
		}
	}
	m := waitMessages(t, b, "pay", 0, 1)[0]
	if string(m.Body) != "commit me" || m.UniqueID() != "AAAA0000000000000000000000000001" || m.Tags() != "tx" {
		t.Fatalf("committed %+v", m)
	}
	// The same end again is a duplicate; the other outcome conflicts; a
	// wrong group or offset is refused.
	if resp := invoke(t, c, rmq.EndTransaction, endExt("TXG", commit, 8, false, ""), nil); resp.Code != rmq.Success {
		t.Fatalf("duplicate commit: %d %q", resp.Code, resp.Remark)
	}
	if resp := invoke(t, c, rmq.EndTransaction, endExt("TXG", commit, 12, false, ""), nil); resp.Code == rmq.Success {
		t.Fatal("rollback after commit accepted")
	}
	if resp := invoke(t, c, rmq.EndTransaction, endExt("OTHER", unknown, 8, false, ""), nil); resp.Code == rmq.Success {
		t.Fatal("commit by another group accepted")
	}
	if resp := invoke(t, c, rmq.EndTransaction, map[string]string{"producerGroup": "TXG"}, nil); resp.Code != rmq.InvalidParameter {
		t.Fatalf("no offsets: %d %q", resp.Code, resp.Remark)
	}
	if st, _ := b.QueueState("pay", 0); st.MaxOffset != 1 {
		t.Fatalf("queue after ends: %+v", st)
	}
}

// checkBack waits for CHECK_TRANSACTION_STATE for a half message, checks
// it as a producer reads it, and answers it as the clients do: with the
// header's offsets, fromTransactionCheck and bname "".
func checkBack(t *testing.T, c *rmq.Conn, calls brokerCalls, b *server.Server, sent *rmq.Command, group, topic string, kind int) {
	t.Helper()
	req := calls.next(t, rmq.CheckTransactionState, 15*time.Second)
	_, phys, _ := message.ParseOffsetMsgID(sent.String("msgId"))
	uniq := sent.String("transactionId")
	if !req.IsOneway() || req.String("msgId") != uniq || req.String("transactionId") != uniq ||
		req.String("tranStateTableOffset") == "" || req.String("commitLogOffset") == "" || req.String("bname") != b.Options().BrokerName {
		t.Fatalf("check header: %v", req.Ext)
	}
	m, err := message.Decode(req.Body)
	if err != nil {
		t.Fatalf("check body: %v", err)
	}
	if m.Topic != topic || m.QueueID != 0 || m.UniqueID() != uniq || m.Properties[message.PropertyProducerGroup] != group ||
		m.PhysicalOffset != mustInt(t, req.String("commitLogOffset")) || m.MsgID() != req.String("offsetMsgId") {
		t.Fatalf("check body: %+v (header %v, first copy at %d)", m, req.Ext, phys)
	}
	ext := map[string]string{"producerGroup": group, "tranStateTableOffset": req.String("tranStateTableOffset"),
		"commitLogOffset": req.String("commitLogOffset"), "commitOrRollback": strconv.Itoa(kind),
		"fromTransactionCheck": "true", "msgId": uniq, "transactionId": req.String("transactionId"), "bname": ""}
	if resp := invoke(t, c, rmq.EndTransaction, ext, nil); resp.Code != rmq.Success {
		t.Fatalf("end after check: %d %q", resp.Code, resp.Remark)
	}
}

func mustInt(t *testing.T, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCheckBackAfterHeartbeat: a producer group registered by heartbeat
// is checked back on its connection.
func TestCheckBackAfterHeartbeat(t *testing.T) {
	b := txnBroker(t, 300*time.Millisecond)
	newTopic(t, b, "pay", 1)
	calls := make(brokerCalls, 16)
	c := dialBroker(t, b.Addr(), calls)
	hb := []byte(`{"clientID":"10.0.0.9@9","producerDataSet":[{"groupName":"TXG"},{"groupName":"CLIENT_INNER_PRODUCER"}],"consumerDataSet":[]}`)
	if resp := invoke(t, c, rmq.HeartBeat, nil, hb); resp.Code != rmq.Success {
		t.Fatalf("heartbeat: %d %q", resp.Code, resp.Remark)
	}
	sent := sendHalf(t, c, "TXG", "pay", "BBBB0000000000000000000000000001", "checked")
	checkBack(t, c, calls, b, sent, "TXG", "pay", 8)
	if m := waitMessages(t, b, "pay", 0, 1)[0]; string(m.Body) != "checked" {
		t.Fatalf("committed %+v", m)
	}
}

// TestCheckBackWithoutHeartbeat: a producer that sent its half message
// but never heartbeated (the Go client may heartbeat 30 s after its first
// send) is checked back on the connection it sent on.
func TestCheckBackWithoutHeartbeat(t *testing.T) {
	b := txnBroker(t, 300*time.Millisecond)
	newTopic(t, b, "pay", 1)
	calls := make(brokerCalls, 16)
	c := dialBroker(t, b.Addr(), calls)
	sent := sendHalf(t, c, "TXG", "pay", "CCCC0000000000000000000000000001", "rolled back")
	checkBack(t, c, calls, b, sent, "TXG", "pay", 12)
	calls.none(t, rmq.CheckTransactionState, time.Second)

	// Its first heartbeat then replaces the provisional session: checks
	// still arrive, and a closed connection gets none.
	hb := []byte(`{"clientID":"10.0.0.9@10","producerDataSet":[{"groupName":"OTHER"}]}`)
	if resp := invoke(t, c, rmq.HeartBeat, nil, hb); resp.Code != rmq.Success {
		t.Fatalf("heartbeat: %d %q", resp.Code, resp.Remark)
	}
	sent = sendHalf(t, c, "TXG", "pay", "CCCC0000000000000000000000000002", "committed later")
	checkBack(t, c, calls, b, sent, "TXG", "pay", 8)
	if m := waitMessages(t, b, "pay", 0, 1)[0]; string(m.Body) != "committed later" {
		t.Fatalf("committed %+v", m)
	}
}

// TestCheckBackProducerSessionKeptBySends: a producer that never
// heartbeats but keeps sending stays registered past the client expiry,
// and its transactions are still checked back.
func TestCheckBackProducerSessionKeptBySends(t *testing.T) {
	b := startBroker(t, func(o *broker.Options) {
		o.ClientExpiry = 900 * time.Millisecond
		o.Transaction = broker.TransactionOptions{Timeout: 2 * time.Second, CheckInterval: time.Second, CheckMax: 15}
	})
	newTopic(t, b, "pay", 1)
	calls := make(brokerCalls, 16)
	c := dialBroker(t, b.Addr(), calls)
	sent := sendHalf(t, c, "TXG", "pay", "EEEE0000000000000000000000000001", "kept")
	for range 10 { // 2.5 s of plain sends of the group, nearly three expiries
		time.Sleep(250 * time.Millisecond)
		if resp := invoke(t, c, rmq.SendMessage, sendExt("TXG", "pay", 0, 0, ""), []byte("plain")); resp.Code != rmq.Success {
			t.Fatalf("send: %d %q", resp.Code, resp.Remark)
		}
	}
	checkBack(t, c, calls, b, sent, "TXG", "pay", 8)
}
