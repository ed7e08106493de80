package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

const defaultDeadLetterMax = 200

type dlqGroupJSON struct {
	Group    string `json:"group"`
	Messages int64  `json:"messages"`
	Topic    string `json:"topic"`
}

// dlqGroups: every %DLQ% topic with its message count, from one
// TopicStats.
func (c *Console) dlqGroups(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	stats, err := topicStats(ctx, cl.admin)
	if err != nil && len(stats) == 0 {
		return nil, err
	}
	out := struct {
		Groups []dlqGroupJSON `json:"groups"`
		Error  string         `json:"error"`
	}{Groups: []dlqGroupJSON{}}
	for _, t := range topicSummaries(stats, func(kind string) bool { return kind == kindDLQ }) {
		out.Groups = append(out.Groups, dlqGroupJSON{Group: strings.TrimPrefix(t.Topic, message.DLQTopicPrefix),
			Messages: t.Messages, Topic: t.Topic})
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out, nil
}

type replayMarkJSON struct {
	At          jsTime `json:"at"`
	Topic       string `json:"topic"`
	MsgID       string `json:"msgId"`
	OffsetMsgID string `json:"offsetMsgId"`
}

type deadLetterJSON struct {
	summaryJSON
	OriginTopic   string          `json:"originTopic"`
	OriginMsgID   string          `json:"originMsgId"`
	FirstFailure  jsTime          `json:"firstFailure"`
	LastFailure   jsTime          `json:"lastFailure"`
	FailureReason string          `json:"failureReason"`
	Replayed      bool            `json:"replayed"`
	Replay        *replayMarkJSON `json:"replay"`
}

// deadLetterExportJSON is a dead letter with its properties and body.
type deadLetterExportJSON struct {
	deadLetterJSON
	Properties map[string]string `json:"properties"`
	Body       string            `json:"body"`
	BodyText   *string           `json:"bodyText,omitempty"`
}

func deadLetterOf(d *client.DeadLetter) deadLetterJSON {
	out := deadLetterJSON{OriginTopic: d.OriginTopic, OriginMsgID: d.OriginOffsetMsgID, FirstFailure: jsTime(d.FirstFailure),
		LastFailure: jsTime(d.LastFailure), FailureReason: d.Reason, Replayed: d.Replayed != nil}
	if d.Message != nil {
		out.summaryJSON = summaryOf(d.Message)
	}
	// The entry's own identity, whatever the stored message says.
	out.MsgID, out.OffsetMsgID, out.Broker, out.QueueOffset = d.MsgID, d.OffsetMsgID, d.BrokerName, d.QueueOffset
	out.ReconsumeTimes = d.ReconsumeTimes
	if r := d.Replayed; r != nil {
		out.Replay = &replayMarkJSON{At: jsTime(r.At), Topic: r.Topic, MsgID: r.MsgID, OffsetMsgID: r.OffsetMsgID}
	}
	return out
}

func (c *Console) deadLetters(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	group := cl.r.PathValue("group")
	if err := message.ValidateGroup(group); err != nil {
		return nil, errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	max, err := intParam(cl.r, "max", defaultDeadLetterMax, 10_000)
	if err != nil {
		return nil, err
	}
	if max == 0 {
		max = defaultDeadLetterMax
	}
	topic := cl.r.URL.Query().Get("topic")
	q := client.DeadLetterQuery{Max: max}
	if topic != "" {
		q.Max = 0 // filtered here, then capped
	}
	dls, err := cl.admin.DeadLetters(ctx, group, q)
	if err != nil {
		return nil, err
	}
	out := struct {
		DeadLetters []deadLetterJSON `json:"deadLetters"`
	}{DeadLetters: []deadLetterJSON{}}
	for i := range dls {
		if topic != "" && dls[i].OriginTopic != topic {
			continue
		}
		if len(out.DeadLetters) == max {
			break
		}
		out.DeadLetters = append(out.DeadLetters, deadLetterOf(&dls[i]))
	}
	return out, nil
}

// exportDeadLetters streams every dead letter of a group as NDJSON.
func (c *Console) exportDeadLetters(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	group := cl.r.PathValue("group")
	if err := message.ValidateGroup(group); err != nil {
		return nil, errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 4*c.opts.Timeout)
	defer cancel()
	dls, err := cl.admin.DeadLetters(ctx, group, client.DeadLetterQuery{})
	if err != nil {
		return nil, err
	}
	h := cl.w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Disposition", `attachment; filename="dlq-`+group+`.ndjson"`)
	h.Set("Cache-Control", "no-store")
	enc := json.NewEncoder(cl.w)
	for i := range dls {
		d := &dls[i]
		line := deadLetterExportJSON{deadLetterJSON: deadLetterOf(d), Properties: map[string]string{}}
		if m := d.Message; m != nil {
			full := fullOf(m)
			line.Properties, line.Body, line.BodyText = full.Properties, full.Body, full.BodyText
		}
		if err := enc.Encode(line); err != nil {
			break // the client went away
		}
	}
	return streamed, nil
}

type replayRequest struct {
	IDs     []string `json:"ids"`
	ToTopic string   `json:"toTopic"`
	DryRun  bool     `json:"dryRun"`
}

type replayProgressJSON struct {
	Done     int    `json:"done"`
	Total    int    `json:"total"`
	Replayed int    `json:"replayed"`
	Failed   int    `json:"failed"`
	Skipped  int    `json:"skipped"`
	MsgID    string `json:"msgId"`
	Outcome  string `json:"outcome"`
	Error    string `json:"error"`
}

type replaySummaryJSON struct {
	Selected int      `json:"selected"`
	Replayed int      `json:"replayed"`
	Skipped  int      `json:"skipped"`
	Failed   int      `json:"failed"`
	NotFound []string `json:"notFound"`
	DryRun   bool     `json:"dryRun"`
}

// ndjson writes lines, flushing each; the header goes with the first.
type ndjson struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	started bool
}

func (n *ndjson) line(v any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started {
		n.started = true
		n.w.Header().Set("Content-Type", "application/x-ndjson")
		n.w.Header().Set("Cache-Control", "no-store")
		n.w.Header().Set("X-Content-Type-Options", "nosniff")
		n.w.WriteHeader(http.StatusOK)
	}
	_ = json.NewEncoder(n.w).Encode(v)
	if f, ok := n.w.(http.Flusher); ok {
		f.Flush()
	}
}

func outcomeName(o client.ReplayOutcome) string {
	switch o {
	case client.Replayed:
		return "replayed"
	case client.ReplaySkipped:
		return "skipped"
	}
	return "failed"
}

// replay replays dead letters, streaming a line per entry and a summary.
func (c *Console) replay(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	group := cl.r.PathValue("group")
	var req replayRequest
	if err := decode(cl.r, &req); err != nil {
		return nil, err
	}
	if err := message.ValidateGroup(group); err != nil {
		return nil, errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	if req.IDs != nil && len(req.IDs) == 0 {
		return nil, badRequest("ids is empty: give the dead letters to replay, or null for all")
	}
	if req.ToTopic != "" {
		if err := message.ValidateTopic(req.ToTopic); err != nil {
			return nil, errcode.Errorf(errcode.IllegalTopic, "toTopic: %v", err)
		}
	}
	out := &ndjson{w: cl.w}
	var p replayProgressJSON
	opts := client.ReplayOptions{IDs: req.IDs, All: req.IDs == nil, ToTopic: req.ToTopic, DryRun: req.DryRun,
		Progress: func(rp client.ReplayProgress) {
			p.Done, p.Total = rp.Done, rp.Total
			p.Outcome, p.Error, p.MsgID = outcomeName(rp.Outcome), "", ""
			switch rp.Outcome {
			case client.Replayed:
				p.Replayed++
			case client.ReplaySkipped:
				p.Skipped++
			default:
				p.Failed++
			}
			if rp.Err != nil {
				p.Error = rp.Err.Error()
			}
			if rp.Entry != nil {
				p.MsgID = rp.Entry.MsgID
			}
			out.line(p)
		}}
	sum, err := cl.admin.ReplayDeadLetters(ctx, group, opts)
	if err != nil {
		if !out.started {
			return nil, err
		}
		code, _ := classify(err)
		out.line(struct {
			Error errorObj `json:"error"`
			Final bool     `json:"final"`
		}{Error: errorObj{Code: code.String(), Message: err.Error()}, Final: true})
		return streamed, nil
	}
	out.line(struct {
		Summary replaySummaryJSON `json:"summary"`
		Final   bool              `json:"final"`
	}{Summary: replaySummaryJSON{Selected: sum.Selected, Replayed: sum.Replayed, Skipped: sum.Skipped, Failed: sum.Failed,
		NotFound: nonNil(sum.NotFound), DryRun: sum.DryRun}, Final: true})
	return streamed, nil
}
