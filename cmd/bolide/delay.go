package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
)

func newDelayCmd(a *app) *cobra.Command {
	return groupCmd("delay", "Inspect delayed delivery and cancel timer messages",
		"  bolide delay status\n  bolide delay cancel --topic orders 0A0B0C0D00002A9F0000000000000001",
		newDelayStatusCmd(a),
		newDelayCancelCmd(a),
	)
}

// delayLevelJSON is one delay level of delay status.
type delayLevelJSON struct {
	Level       int    `json:"level"`
	Delay       string `json:"delay"`
	Offset      int64  `json:"offset"`
	MaxOffset   int64  `json:"maxOffset"`
	Pending     int64  `json:"pending"`
	NextDeliver string `json:"nextDeliver,omitempty"`
	nextDeliver time.Time
}

// delayStatusJSON is one broker of delay status.
type delayStatusJSON struct {
	Broker         string           `json:"broker"`
	Addr           string           `json:"addr"`
	TimerEnabled   bool             `json:"timerEnabled"`
	MaxDelay       string           `json:"maxDelay"`
	TimerPending   int64            `json:"timerPending"`
	IndexedOffset  int64            `json:"indexedOffset"`
	QueueMaxOffset int64            `json:"queueMaxOffset"`
	Buckets        int64            `json:"buckets"`
	LoadedBuckets  int64            `json:"loadedBuckets"`
	LoadedEntries  int64            `json:"loadedEntries"`
	IndexBytes     int64            `json:"indexBytes"`
	Delivered      int64            `json:"delivered"`
	Cancelled      int64            `json:"cancelled"`
	Lost           int64            `json:"lost"`
	NextDue        string           `json:"nextDue,omitempty"`
	Levels         []delayLevelJSON `json:"levels"`
	Error          string           `json:"error,omitempty"`
	nextDue        time.Time
}

func newDelayStatusCmd(a *app) *cobra.Command {
	var brokers []string
	var all bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Show each master's delay levels and timing wheel: pending, next due, delivered",
		Long: `Ask every master broker (or the --broker groups) about delayed delivery: for each
delay level, how far SCHEDULE_TOPIC_XXXX's queue is delivered and how many wait; for
the timing wheel (timer messages), how many are pending, how far the timer topic is
indexed, the index's size on disk and what was delivered, cancelled or lost.
Levels with nothing ever sent are left out unless --all.`,
		Example: "  bolide delay status\n  bolide delay status --broker broker-a --all -o json",
		Args:    exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error {
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			ci, err := adm.ClusterInfo(ctx)
			if err != nil {
				return err
			}
			names := brokers
			if len(names) == 0 {
				for n := range ci.Brokers {
					names = append(names, n)
				}
			}
			sort.Strings(names)
			if len(names) == 0 {
				return fmt.Errorf("no broker registered")
			}
			now := time.Now()
			for i, n := range names {
				bd, ok := ci.Brokers[n]
				if !ok {
					return usageErrorf("--broker %q is not registered", n)
				}
				j := delayStatusJSON{Broker: n, Addr: bd.MasterAddr(), Levels: []delayLevelJSON{}}
				if j.Addr == "" {
					j.Error = "no master registered"
				} else if st, err := adm.DelayStatus(ctx, j.Addr); err != nil {
					j.Error = a.describeError(err)
				} else {
					fillDelayStatus(&j, st, all)
				}
				if a.json() {
					if err := a.emit(j); err != nil {
						return err
					}
					continue
				}
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				if err := writeDelayStatus(a, j, now); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringSliceVar(&brokers, "broker", nil, "only these broker groups (repeatable)")
	f.BoolVar(&all, "all", false, "list every delay level, also those never used")
	return c
}

func fillDelayStatus(j *delayStatusJSON, st *client.DelayStatus, all bool) {
	t := st.Timer
	j.TimerEnabled, j.MaxDelay, j.TimerPending = t.Enabled, shortDuration(t.MaxDelay), t.Pending
	j.IndexedOffset, j.QueueMaxOffset = t.IndexedOffset, t.QueueMaxOffset
	j.Buckets, j.LoadedBuckets, j.LoadedEntries, j.IndexBytes = t.Buckets, t.LoadedBuckets, t.LoadedEntries, t.IndexBytes
	j.Delivered, j.Cancelled, j.Lost = t.Delivered, t.Cancelled, t.Lost
	if !t.NextDue.IsZero() {
		j.NextDue, j.nextDue = jsonTime(t.NextDue), t.NextDue
	}
	for _, l := range st.Levels {
		if !all && l.MaxOffset == 0 {
			continue
		}
		lj := delayLevelJSON{Level: l.Level, Delay: shortDuration(l.Delay), Offset: l.Offset, MaxOffset: l.MaxOffset, Pending: l.Pending}
		if !l.NextDeliver.IsZero() {
			lj.NextDeliver, lj.nextDeliver = jsonTime(l.NextDeliver), l.NextDeliver
		}
		j.Levels = append(j.Levels, lj)
	}
}

// writeDelayStatus prints one broker: a summary line for the timing wheel,
// then a table of levels.
func writeDelayStatus(a *app, j delayStatusJSON, now time.Time) error {
	fmt.Fprintf(a.stdout, "%s (%s)\n", j.Broker, cell(j.Addr))
	if j.Error != "" {
		_, err := fmt.Fprintf(a.stdout, "  error: %s\n", j.Error)
		return err
	}
	if !j.TimerEnabled {
		fmt.Fprintln(a.stdout, "  timer messages: disabled")
	} else {
		next := "-"
		if !j.nextDue.IsZero() {
			next = fmt.Sprintf("%s (in %v)", formatTime(j.nextDue), j.nextDue.Sub(now).Round(time.Millisecond))
		}
		fmt.Fprintf(a.stdout, "  timer messages: %d pending, next due %s, max delay %s\n", j.TimerPending, next, j.MaxDelay)
		fmt.Fprintf(a.stdout, "  timer index: %d buckets (%d loaded, %d entries in the wheel), %s; timer topic indexed to %d of %d\n",
			j.Buckets, j.LoadedBuckets, j.LoadedEntries, humanBytes(j.IndexBytes), j.IndexedOffset, j.QueueMaxOffset)
		fmt.Fprintf(a.stdout, "  since start: %d delivered, %d cancelled, %d lost\n", j.Delivered, j.Cancelled, j.Lost)
	}
	if len(j.Levels) == 0 {
		_, err := fmt.Fprintln(a.stdout, "  delay levels: none used")
		return err
	}
	t := newTable("  LEVEL", "DELAY", "DELIVERED TO", "MAX OFFSET", "PENDING", "NEXT DELIVERY")
	for _, l := range j.Levels {
		t.row(fmt.Sprintf("  %d", l.Level), l.Delay, l.Offset, l.MaxOffset, l.Pending, formatTime(l.nextDeliver))
	}
	return t.write(a.stdout)
}

func newDelayCancelCmd(a *app) *cobra.Command {
	var topic string
	c := &cobra.Command{
		Use:   "cancel --topic TOPIC MSGID...",
		Short: "Cancel pending timer messages by their msg id (unique id)",
		Long: `Cancel timer messages (sent with --delay or --deliver-at) before they are due, by the
msg id 'bolide send' printed (MSGID, the unique id; not the OFFSETMSGID of the copy
waiting in the timer topic). Once this reports "cancelled" the message is
never delivered. A message already delivered, or unknown, is reported as such and the
command fails.`,
		Example: "  bolide delay cancel --topic orders 0A0B0C0D00002A9F0000000000000001",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, ids []string) error {
			if topic == "" {
				return usageErrorf("--topic is required")
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			var failed int
			for _, id := range ids {
				status := "cancelled"
				if err := adm.CancelDelayed(ctx, topic, id); err != nil {
					failed++
					status = a.describeError(err)
				}
				if a.json() {
					if err := a.emit(map[string]string{"msgId": id, "topic": topic, "status": status}); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(a.stdout, "%s  %s\n", id, status)
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d not cancelled", failed, len(ids))
			}
			return nil
		},
	}
	c.Flags().StringVarP(&topic, "topic", "t", "", "the topic the messages were sent to (required)")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

// shortDuration prints d without zero units ("1m", "1h30m", "2h") and whole
// days as days ("400d").
func shortDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= day && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	s := d.String()
	for _, z := range []string{"0s", "0m"} {
		if len(s) > len(z) && strings.HasSuffix(s, z) && (s[len(s)-len(z)-1] < '0' || s[len(s)-len(z)-1] > '9') {
			s = s[:len(s)-len(z)]
		}
	}
	return s
}
