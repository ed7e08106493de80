package rocketmqgo_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// adminMu serialises the RocketMQ admin clients: the client has no
// instance-name option, so every admin of a process shares one clientID
// and one client object, which refuses a second NameServer list.
var adminMu sync.Mutex

func TestAdminAPI(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		adminMu.Lock()
		defer adminMu.Unlock()
		adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{c.NameSrv})))
		if err != nil {
			t.Fatalf("new admin: %v", err)
		}
		defer adm.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()

		topic := uniq("admin")
		for _, b := range c.Brokers {
			err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(b.Addr),
				admin.WithReadQueueNums(3), admin.WithWriteQueueNums(3))
			if err != nil {
				t.Fatalf("CreateTopic on %s: %v", b.Name, err)
			}
		}
		// The brokers publish the new topic's route to the NameServer. (The
		// client caches the first route it gets for good: ask once it is
		// complete.)
		if !waitFor(15*time.Second, func() bool {
			r, err := c.Admin.Route(ctx, topic)
			return err == nil && len(r.Queues) == len(c.Brokers)
		}) {
			t.Fatalf("%s not routed on every broker 15 s after CreateTopic", topic)
		}
		mqs, err := adm.FetchPublishMessageQueues(ctx, topic)
		if err != nil || len(mqs) != 3*len(c.Brokers) {
			t.Fatalf("FetchPublishMessageQueues(%s): %d queues (%v), want %d", topic, len(mqs), err, 3*len(c.Brokers))
		}
		for _, b := range c.Brokers {
			var ids []int
			for _, q := range mqs {
				if q.BrokerName == b.Name && q.Topic == topic {
					ids = append(ids, q.QueueId)
				}
			}
			slices.Sort(ids)
			if !slices.Equal(ids, []int{0, 1, 2}) {
				t.Errorf("queues of %s on %s: %v, want [0 1 2]", topic, b.Name, ids)
			}
		}
		list, err := adm.FetchAllTopicList(ctx)
		if err != nil {
			t.Fatalf("FetchAllTopicList: %v", err)
		}
		if !slices.Contains(list.TopicList, topic) {
			t.Errorf("FetchAllTopicList lacks %s: %v", topic, list.TopicList)
		}
		clusters, err := adm.FetchClusterList(topic)
		if err != nil || !slices.Contains(clusters, clusterName) {
			t.Errorf("FetchClusterList(%s) = %v, %v; want %s", topic, clusters, err, clusterName)
		}

		// The topic works; its consumer group shows in the subscription
		// groups of every broker.
		p := newProducer(t, c)
		var msgs []*primitive.Message
		for i := range 6 {
			msgs = append(msgs, testMessage(topic, i, "adm"))
		}
		ss := sendAll(t, c, p, msgs)
		group := uniq("admg")
		col := &collector{}
		pc := startPushConsumer(t, c, group, topic, "*", col.listener("push"))
		col.waitDistinct(t, len(ss), 30*time.Second)
		for _, b := range c.Brokers {
			var names []string
			ok := waitFor(10*time.Second, func() bool {
				w, err := adm.GetAllSubscriptionGroup(ctx, b.Addr, 3*time.Second)
				if err != nil {
					t.Logf("GetAllSubscriptionGroup %s: %v", b.Name, err)
					return false
				}
				names = names[:0]
				for name, cfg := range w.SubscriptionGroupTable {
					names = append(names, name)
					if name == group && (cfg.GroupName != group || !cfg.ConsumeEnable) {
						t.Errorf("subscription group %s on %s: %+v", group, b.Name, cfg)
					}
				}
				return slices.Contains(names, group)
			})
			if !ok {
				t.Errorf("GetAllSubscriptionGroup on %s lacks %s: %v", b.Name, group, names)
			}
		}
		_ = pc.Shutdown()

		for _, b := range c.Brokers {
			if err := adm.DeleteTopic(ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(b.Addr),
				admin.WithNameSrvAddr([]string{c.NameSrv})); err != nil {
				t.Fatalf("DeleteTopic on %s: %v", b.Name, err)
			}
		}
		if !waitFor(15*time.Second, func() bool {
			list, err = adm.FetchAllTopicList(ctx)
			return err == nil && !slices.Contains(list.TopicList, topic)
		}) {
			t.Errorf("FetchAllTopicList still lists the deleted %s (%v)", topic, err)
		}
		if !waitFor(15*time.Second, func() bool {
			r, err := c.Admin.Route(ctx, topic)
			return err != nil || len(r.Queues) == 0
		}) {
			t.Errorf("the deleted topic %s is still routed", topic)
		}
	})
}
