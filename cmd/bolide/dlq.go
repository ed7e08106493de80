package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/message"
)

func newDLQCmd(a *app) *cobra.Command {
	return groupCmd("dlq", "Inspect, export and replay dead-lettered messages (%DLQ%<group>)",
		"  bolide dlq list --group billing\n  bolide dlq replay --group billing --all",
		newDLQListCmd(a),
		newDLQShowCmd(a),
		newDLQReplayCmd(a),
		newDLQExportCmd(a),
	)
}

// deadLetterJSON is one dead letter in list and export output.
type deadLetterJSON struct {
	// MsgID is the message's unique id, OffsetMsgID the dead letter's
	// offset id, OriginOffsetMsgID the first stored copy's offset id.
	MsgID             string            `json:"msgId"`
	OffsetMsgID       string            `json:"offsetMsgId"`
	Group             string            `json:"group"`
	Broker            string            `json:"broker"`
	QueueOffset       int64             `json:"queueOffset"`
	OriginTopic       string            `json:"originTopic"`
	OriginOffsetMsgID string            `json:"originOffsetMsgId"`
	ReconsumeTimes    int32             `json:"reconsumeTimes"`
	FirstFailure      string            `json:"firstFailure"`
	LastFailure       string            `json:"lastFailure"`
	Reason            string            `json:"reason"`
	Tags              string            `json:"tags"`
	Keys              []string          `json:"keys"`
	Properties        map[string]string `json:"properties"`
	Body              string            `json:"body,omitempty"`
	// BodyBase64 replaces Body when the body is not UTF-8.
	BodyBase64 string          `json:"bodyBase64,omitempty"`
	Replayed   *replayMarkJSON `json:"replayed"`
}

type replayMarkJSON struct {
	At          string `json:"at"`
	Topic       string `json:"topic"`
	MsgID       string `json:"msgId"`
	OffsetMsgID string `json:"offsetMsgId"`
}

func toDeadLetterJSON(d *client.DeadLetter) deadLetterJSON {
	m := d.Message
	j := deadLetterJSON{MsgID: d.MsgID, OffsetMsgID: d.OffsetMsgID, Group: d.Group, Broker: d.BrokerName,
		QueueOffset: d.QueueOffset, OriginTopic: d.OriginTopic, OriginOffsetMsgID: d.OriginOffsetMsgID, ReconsumeTimes: d.ReconsumeTimes,
		FirstFailure: jsonTime(d.FirstFailure), LastFailure: jsonTime(d.LastFailure), Reason: d.Reason,
		Tags: m.Tag, Keys: []string{}, Properties: map[string]string{}}
	if m.Keys != nil {
		j.Keys = m.Keys
	}
	if m.Properties != nil {
		j.Properties = m.Properties
	}
	if utf8.Valid(m.Body) {
		j.Body = string(m.Body)
	} else {
		j.BodyBase64 = base64.StdEncoding.EncodeToString(m.Body)
	}
	if r := d.Replayed; r != nil {
		j.Replayed = &replayMarkJSON{At: jsonTime(r.At), Topic: r.Topic, MsgID: r.MsgID, OffsetMsgID: r.OffsetMsgID}
	}
	return j
}

// requireGroup checks --group.
func requireGroup(group string) error {
	if group == "" {
		return usageErrorf("--group is required")
	}
	if err := message.ValidateGroup(group); err != nil {
		return usageErrorf("--group: %v", err)
	}
	return nil
}

// sinceFlag parses an optional --since.
func sinceFlag(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := parseTime(s, time.Now())
	if err != nil {
		return time.Time{}, usageErrorf("--since: %v", err)
	}
	return t, nil
}

func newDLQListCmd(a *app) *cobra.Command {
	var group, since string
	var max int
	c := &cobra.Command{
		Use:   "list",
		Short: "List a group's dead-lettered messages",
		Long: `List the messages of a consumer group that failed more than the maximum number of
reconsumes (16 by default) and sit in its dead-letter topic %DLQ%<group>: their msg id
(the message's unique id; use it with dlq show and dlq replay --id), original topic,
reconsume count, first and last failure time, whether they were replayed, and the start
of the body.`,
		Example: "  bolide dlq list --group billing\n  bolide dlq list --group billing --since 1h -o json",
		Args:    exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error {
			list, err := a.deadLetters(group, since, max)
			if err != nil {
				return err
			}
			t := newTable("MSGID", "ORIGINAL TOPIC", "RECONSUMES", "FIRST FAILURE", "LAST FAILURE", "REPLAYED", "BODY")
			for i := range list {
				d := &list[i]
				if a.json() {
					if err := a.emit(toDeadLetterJSON(d)); err != nil {
						return err
					}
					continue
				}
				replayed := "-"
				if d.Replayed != nil {
					replayed = formatTime(d.Replayed.At)
				}
				t.row(d.MsgID, cell(d.OriginTopic), d.ReconsumeTimes, formatTime(d.FirstFailure), formatTime(d.LastFailure),
					replayed, displayBody(d.Message.Body, 40))
			}
			if a.json() {
				return nil
			}
			if len(list) == 0 {
				a.info("no dead letters for group %s", group)
				return nil
			}
			return t.write(a.stdout)
		},
	}
	f := c.Flags()
	f.StringVarP(&group, "group", "g", "", "consumer group (required)")
	f.StringVar(&since, "since", "", "only messages dead-lettered since this time (e.g. 1h, 2026-01-02T15:04:05Z)")
	f.IntVar(&max, "max", 0, "list at most this many (0: all)")
	return c
}

func newDLQShowCmd(a *app) *cobra.Command {
	var group string
	c := &cobra.Command{
		Use:   "show ID",
		Short: "Show one dead-lettered message in full",
		Long: `Show one dead letter: its ids, original topic, reconsume count, failure times, the
reason the consumer gave, its replay mark, tag, keys, properties and body. ID is the msg
id dlq list prints (the message's unique id), the dead letter's offset msg id or the
original offset msg id. Without --group every dead-letter topic is searched.`,
		Example: "  bolide dlq show C0000202074F658629209623B1020001\n  bolide dlq show C0000202074F658629209623B1020001 --group billing -o json",
		Args:    exactArgs(1, "an ID"),
		RunE: func(_ *cobra.Command, args []string) error {
			if group != "" {
				if err := requireGroup(group); err != nil {
					return err
				}
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			groups := []string{group}
			if group == "" {
				topics, err := adm.ListTopics(ctx)
				if err != nil {
					return err
				}
				groups = groups[:0]
				for _, t := range topics {
					if message.IsDLQTopic(t) {
						groups = append(groups, strings.TrimPrefix(t, message.DLQTopicPrefix))
					}
				}
			}
			for _, g := range groups {
				list, err := adm.DeadLetters(ctx, g, client.DeadLetterQuery{IDs: args, Max: 1})
				if err != nil {
					return err
				}
				if len(list) > 0 {
					return a.showDeadLetter(&list[0])
				}
			}
			return fmt.Errorf("no dead letter %s", args[0])
		},
	}
	c.Flags().StringVarP(&group, "group", "g", "", "consumer group (default: search every group)")
	return c
}

func (a *app) showDeadLetter(d *client.DeadLetter) error {
	j := toDeadLetterJSON(d)
	if a.json() {
		return a.emit(j)
	}
	w := a.stdout
	line := func(k string, v any) { fmt.Fprintf(w, "%-17s %v\n", k+":", v) }
	line("Msg id", j.MsgID)
	line("Offset msg id", cell(j.OffsetMsgID))
	line("Group", j.Group)
	line("Broker", fmt.Sprintf("%s (offset %d in %s)", j.Broker, j.QueueOffset, message.DLQTopic(j.Group)))
	line("Original topic", cell(j.OriginTopic))
	line("Origin offset id", cell(j.OriginOffsetMsgID))
	line("Reconsumes", j.ReconsumeTimes)
	line("First failure", formatTime(d.FirstFailure))
	line("Last failure", formatTime(d.LastFailure))
	line("Reason", cell(j.Reason))
	if r := d.Replayed; r != nil {
		line("Replayed", fmt.Sprintf("%s to %s as %s", formatTime(r.At), r.Topic, cell(r.MsgID)))
	} else {
		line("Replayed", "no")
	}
	line("Tag", cell(j.Tags))
	line("Keys", joinOrDash(j.Keys, ","))
	keys := make([]string, 0, len(j.Properties))
	for k := range j.Properties {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	props := make([]string, 0, len(keys))
	for _, k := range keys {
		props = append(props, k+"="+j.Properties[k])
	}
	line("Properties", joinOrDash(props, " "))
	line("Body", displayBody(d.Message.Body, 0))
	return nil
}

// parseRate parses --rate: "N" or "N/s" messages per second.
func parseRate(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "/s"), 64)
	if err != nil || v < 0 {
		return 0, usageErrorf("--rate %q: want messages per second, like 100/s", s)
	}
	return v, nil
}

// replaySummaryJSON is what dlq replay prints with -o json.
type replaySummaryJSON struct {
	Group    string   `json:"group"`
	DryRun   bool     `json:"dryRun"`
	Selected int      `json:"selected"`
	Replayed int      `json:"replayed"`
	Skipped  int      `json:"skipped"`
	Failed   int      `json:"failed"`
	NotFound []string `json:"notFound"`
}

func newDLQReplayCmd(a *app) *cobra.Command {
	var group, since, toTopic, rate string
	var ids []string
	var all, dryRun bool
	c := &cobra.Command{
		Use:   "replay",
		Short: "Send dead-lettered messages again to their original topic (or another)",
		Long: `Replay dead letters: each selected message is sent again, as a new message with its body,
tag, keys and properties, to its original topic or --to-topic. The new message carries
DLQ_REPLAY_GROUP, DLQ_REPLAY_MSG_ID (the dead letter's offset msg id) and
DLQ_REPLAY_ORIGIN_ID (the original msg id, its unique id). Each replayed entry is marked
on its broker, durably, so a later replay skips it; --dry-run shows what would be
replayed and changes nothing.

Progress goes to stderr, one line per message; the summary (replayed, skipped, failed)
to stdout. The exit status is 1 when any replay failed or an --id matches no dead letter.`,
		Example: `  bolide dlq replay --group billing --all --dry-run
  bolide dlq replay --group billing --id C0000202074F658629209623B1020001
  bolide dlq replay --group billing --since 2h --to-topic orders-retry --rate 100/s`,
		Args: exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error {
			if err := requireGroup(group); err != nil {
				return err
			}
			n := 0
			for _, set := range []bool{len(ids) > 0, all, since != ""} {
				if set {
					n++
				}
			}
			if n != 1 {
				return usageErrorf("give exactly one of --id, --all and --since")
			}
			from, err := sinceFlag(since)
			if err != nil {
				return err
			}
			perSec, err := parseRate(rate)
			if err != nil {
				return err
			}
			if toTopic != "" {
				if err := message.ValidateTopic(toTopic); err != nil {
					return usageErrorf("--to-topic: %v", err)
				}
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			verb := "replayed"
			if dryRun {
				verb = "would replay"
			}
			sum, err := adm.ReplayDeadLetters(a.ctx, group, client.ReplayOptions{
				IDs: ids, All: all, Since: from, ToTopic: toTopic, Rate: perSec, DryRun: dryRun,
				Progress: func(p client.ReplayProgress) {
					d := p.Entry
					switch p.Outcome {
					case client.Replayed:
						to := toTopic
						if to == "" {
							to = d.OriginTopic
						}
						if p.Sent != nil {
							a.info("[%d/%d] %s %s to %s as %s", p.Done, p.Total, verb, d.MsgID, to, p.Sent.MsgID)
						} else {
							a.info("[%d/%d] %s %s to %s", p.Done, p.Total, verb, d.MsgID, to)
						}
					case client.ReplaySkipped:
						a.info("[%d/%d] skipped %s: replayed at %s", p.Done, p.Total, d.MsgID, formatTime(d.Replayed.At))
					default:
						a.warn("[%d/%d] replay of %s failed: %v", p.Done, p.Total, d.MsgID, p.Err)
					}
				},
			})
			if err != nil {
				return err
			}
			if a.json() {
				out := replaySummaryJSON{Group: group, DryRun: dryRun, Selected: sum.Selected, Replayed: sum.Replayed,
					Skipped: sum.Skipped, Failed: sum.Failed, NotFound: sum.NotFound}
				if out.NotFound == nil {
					out.NotFound = []string{}
				}
				if err := a.emit(out); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "%s %d, skipped %d (replayed before), failed %d\n", verb, sum.Replayed, sum.Skipped, sum.Failed)
			}
			return replayError(group, sum)
		},
	}
	f := c.Flags()
	f.StringVarP(&group, "group", "g", "", "consumer group (required)")
	f.StringSliceVar(&ids, "id", nil, "replay this dead letter (msg id, offset msg id or original offset msg id; repeatable)")
	f.BoolVar(&all, "all", false, "replay every dead letter not replayed yet")
	f.StringVar(&since, "since", "", "replay the dead letters since this time (e.g. 1h)")
	f.StringVar(&toTopic, "to-topic", "", "send to this topic instead of the original one")
	f.StringVar(&rate, "rate", "", "at most this many messages per second (e.g. 100/s; default: no limit)")
	f.BoolVar(&dryRun, "dry-run", false, "show what would be replayed; change nothing")
	_ = c.RegisterFlagCompletionFunc("to-topic", a.topicCompletion)
	return c
}

// replayError is the failure of a replay, nil when every selected entry
// was replayed or skipped and every requested id was found: one line that
// names the ids not found.
func replayError(group string, sum client.ReplaySummary) error {
	var parts []string
	if sum.Failed > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d replays failed", sum.Failed, sum.Selected))
	}
	if n := len(sum.NotFound); n > 0 {
		noun := "dead letter"
		if n > 1 {
			noun = "dead letters"
		}
		parts = append(parts, fmt.Sprintf("no %s %s in group %s (see 'bolide dlq list --group %s')",
			noun, strings.Join(sum.NotFound, ", "), group, group))
	}
	if len(parts) == 0 {
		return nil
	}
	return errors.New(strings.Join(parts, "; "))
}

func newDLQExportCmd(a *app) *cobra.Command {
	var group, since, format string
	c := &cobra.Command{
		Use:   "export",
		Short: "Export a group's dead letters, one JSON object per line",
		Long: `Export every dead letter of a group as JSON lines on stdout (the objects dlq list -o json
prints): ids, original topic, reconsume count, failure times and reason, tag, keys,
properties, the body (bodyBase64 when it is not UTF-8) and the replay mark.`,
		Example: "  bolide dlq export --group billing --format jsonl > billing-dlq.jsonl",
		Args:    exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error {
			if format != "jsonl" {
				return usageErrorf("--format must be jsonl, not %q", format)
			}
			list, err := a.deadLetters(group, since, 0)
			if err != nil {
				return err
			}
			for i := range list {
				if err := emitJSON(a.stdout, toDeadLetterJSON(&list[i])); err != nil {
					return err
				}
			}
			a.info("exported %d dead letters of group %s", len(list), group)
			return nil
		},
	}
	f := c.Flags()
	f.StringVarP(&group, "group", "g", "", "consumer group (required)")
	f.StringVar(&format, "format", "jsonl", "output format: jsonl")
	f.StringVar(&since, "since", "", "only messages dead-lettered since this time")
	return c
}

// deadLetters lists the dead letters of group stored since --since (at
// most max; 0: all), for dlq list and export.
func (a *app) deadLetters(group, since string, max int) ([]client.DeadLetter, error) {
	if err := requireGroup(group); err != nil {
		return nil, err
	}
	from, err := sinceFlag(since)
	if err != nil {
		return nil, err
	}
	adm, err := a.adminClient()
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.opCtx()
	defer cancel()
	return adm.DeadLetters(ctx, group, client.DeadLetterQuery{Since: from, Max: max})
}
