package v1wire

import (
	"github.com/bolide-mq/bolide/auth"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// AuthorizeSend checks that p may publish to the topic of every message of
// req (a retry topic needs its group's SUB, as in RocketMQ), for the gRPC
// and frame front ends alike. With ACL off it allows at once.
func AuthorizeSend(g *auth.Guard, p *auth.Principal, peer string, req *pb.SendRequest) error {
	if !g.Enabled() {
		return nil
	}
	if len(req.GetMessages()) == 0 {
		return g.Authenticated(p, peer)
	}
	last := ""
	for i, m := range req.GetMessages() {
		t := m.GetTopic()
		if i > 0 && t == last {
			continue // a batch names one topic: check it once
		}
		last = t
		if err := g.Authorize(p, peer, auth.TopicNeed(t, auth.Pub)); err != nil {
			return err
		}
	}
	return nil
}

// AuthorizePull checks that p may subscribe to req's topic and consume as
// its group. With ACL off it allows at once.
func AuthorizePull(g *auth.Guard, p *auth.Principal, peer string, req *pb.PullRequest) error {
	if !g.Enabled() {
		return nil
	}
	return g.Authorize(p, peer, auth.TopicNeed(req.GetTopic(), auth.Sub), auth.GroupNeed(req.GetGroup(), auth.Sub))
}
