package v1wire

import (
	"github.com/bolide-mq/bolide/auth"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// SendNeeds is what a send needs: PUB on the topic of every message of
// req (a retry topic: its group's SUB, as in RocketMQ), each topic once in
// a row (a batch names one topic), and on the topic of its packed messages.
func SendNeeds(req *pb.SendRequest) []auth.Need {
	var needs []auth.Need
	if len(req.GetPacked()) > 0 || req.GetPackedTopic() != "" {
		needs = append(needs, auth.TopicNeed(req.GetPackedTopic(), auth.Pub))
	}
	for _, m := range req.GetMessages() {
		n := auth.TopicNeed(m.GetTopic(), auth.Pub)
		if len(needs) == 0 || needs[len(needs)-1] != n {
			needs = append(needs, n)
		}
	}
	return needs
}

// AuthorizeSend checks that p may make the send req (SendNeeds), for the
// gRPC and frame front ends alike. With ACL off it allows at once.
func AuthorizeSend(g *auth.Guard, p *auth.Principal, peer string, req *pb.SendRequest) error {
	if !g.Enabled() {
		return nil
	}
	return g.Authorize(p, peer, SendNeeds(req)...)
}

// AuthorizePull checks that p may subscribe to req's topic and consume as
// its group. With ACL off it allows at once.
func AuthorizePull(g *auth.Guard, p *auth.Principal, peer string, req *pb.PullRequest) error {
	if !g.Enabled() {
		return nil
	}
	return g.Authorize(p, peer, auth.TopicNeed(req.GetTopic(), auth.Sub), auth.GroupNeed(req.GetGroup(), auth.Sub))
}
