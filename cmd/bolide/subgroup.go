package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/message"
)

// subGroupJSON is a subscription group's declaration on one broker group
// (group get), or what group create and update declared (brokers listed).
type subGroupJSON struct {
	Group               string           `json:"group"`
	Broker              string           `json:"broker,omitempty"`
	Brokers             []string         `json:"brokers,omitempty"`
	FIFO                bool             `json:"fifo"`
	MaxDeliveryAttempts int              `json:"maxDeliveryAttempts"`
	RetryPolicy         string           `json:"retryPolicy"`
	RetryBackoff        []string         `json:"retryBackoff,omitempty"`
	Exponential         *exponentialJSON `json:"exponential,omitempty"`
	ConsumeEnable       bool             `json:"consumeEnable"`
}

type exponentialJSON struct {
	Initial    string `json:"initial"`
	Max        string `json:"max"`
	Multiplier int64  `json:"multiplier"`
}

func toSubGroupJSON(g client.SubscriptionGroup) subGroupJSON {
	j := subGroupJSON{Group: g.Name, Broker: g.BrokerName, FIFO: g.FIFO, MaxDeliveryAttempts: g.MaxDeliveryAttempts,
		RetryPolicy: g.RetryPolicy, RetryBackoff: durations(g.RetryBackoff), ConsumeEnable: g.ConsumeEnable}
	if e := g.Exponential; e != nil {
		j.Exponential = &exponentialJSON{Initial: shortDuration(e.Initial), Max: shortDuration(e.Max), Multiplier: e.Multiplier}
	}
	return j
}

func durations(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = shortDuration(d)
	}
	return out
}

// backoffText is a group's retry backoff in one cell.
func backoffText(j subGroupJSON) string {
	if e := j.Exponential; e != nil {
		return fmt.Sprintf("exponential %s×%d (max %s)", e.Initial, e.Multiplier, e.Max)
	}
	return strings.Join(j.RetryBackoff, " ")
}

// parseBackoff parses --retry-backoff: durations separated by commas.
func parseBackoff(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range splitList(s) {
		d, err := parseDuration(part)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", part, err)
		}
		if d <= 0 {
			return nil, fmt.Errorf("%q: a backoff must be positive", part)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("give at least one duration, e.g. 1s,5s,10s")
	}
	return out, nil
}

func newGroupCreateCmd(a *app, update bool) *cobra.Command {
	var (
		fifo     bool
		attempts int
		backoff  string
		cluster  string
		brokers  string
		consume  bool
	)
	c := &cobra.Command{
		Use:   "create GROUP",
		Short: "Declare a subscription group: FIFO, maximum delivery attempts, retry backoff, consumption on or off",
		Long: `Declare a subscription group on every master (or those of --cluster, or of --broker). Its
settings govern POP consumption (bolide consume --pop and RocketMQ 5 clients): --fifo hands
out a queue's next messages only once the previous ones are acknowledged; a message delivered
--max-delivery-attempts times without an acknowledgement goes to %DLQ%GROUP; --retry-backoff
is the wait before the first, second, ... redelivery of a failed message (the last value
repeats; default 10s 30s 1m 2m ... 2h). --consume-enable=false declares the group stopped:
the brokers refuse its pulls and POP receives (every protocol) until it is enabled with
'bolide group update GROUP --consume-enable'; its offsets stay, sends go on. A group already
declared is an error.`,
		Example: `  bolide group create billing
  bolide group create ledger --fifo --max-delivery-attempts 5 --retry-backoff 1s,5s,10s
  bolide group create audit --broker broker-a -o json
  bolide group create reports --consume-enable=false`,
		Args:              exactArgs(1, "a GROUP"),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	if update {
		c.Use = "update GROUP"
		c.Short = "Change a subscription group's FIFO flag, delivery attempts, retry backoff or consumption (or declare it)"
		c.Long = `Change a subscription group with the flags of group create. Settings not given keep their
current value; a group not declared yet is declared. --consume-enable=false stops the group:
its consumers' pulls and POP receives are refused (NO_PERMISSION) on every protocol, nothing
else changes; --consume-enable starts it again where it stopped.`
		c.Example = `  bolide group update ledger --max-delivery-attempts 10
  bolide group update ledger --fifo=false
  bolide group update billing --consume-enable=false
  bolide group update billing --consume-enable
  bolide group update ledger --retry-backoff 2s,30s -o json`
		c.ValidArgsFunction = a.groupArgCompletion
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		group := args[0]
		if err := message.ValidateGroup(group); err != nil {
			return usageErrorf("%v", err)
		}
		if cmd.Flags().Changed("max-delivery-attempts") && (attempts < 1 || attempts > 1000) {
			return usageErrorf("--max-delivery-attempts must be in 1..1000, not %d", attempts)
		}
		spec := client.SubscriptionGroupSpec{Name: group, FIFO: fifo, MaxDeliveryAttempts: attempts,
			Cluster: cluster, BrokerNames: splitList(brokers)}
		if cmd.Flags().Changed("retry-backoff") {
			b, err := parseBackoff(backoff)
			if err != nil {
				return usageErrorf("--retry-backoff: %v", err)
			}
			spec.RetryBackoff = b
		}
		if cmd.Flags().Changed("consume-enable") {
			spec.ConsumeEnable = &consume
		}
		adm, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.opCtx()
		defer cancel()
		if update {
			cur, err := adm.SubscriptionGroup(ctx, group)
			switch {
			case errors.Is(err, client.ErrGroupNotExist):
			case err != nil:
				return err
			default:
				fs := cmd.Flags()
				g := cur[0]
				if !fs.Changed("fifo") {
					spec.FIFO = g.FIFO
				}
				if !fs.Changed("max-delivery-attempts") {
					spec.MaxDeliveryAttempts = g.MaxDeliveryAttempts
				}
				if !fs.Changed("retry-backoff") {
					spec.RetryBackoff, spec.Exponential = g.RetryBackoff, g.Exponential
					if g.RetryPolicy == client.RetryExponential {
						spec.RetryBackoff = nil
					}
				}
				if !fs.Changed("cluster") && !fs.Changed("broker") {
					for _, g := range cur {
						spec.BrokerNames = append(spec.BrokerNames, g.BrokerName)
					}
				}
			}
			err = adm.UpdateSubscriptionGroup(ctx, spec)
			if err != nil {
				return err
			}
		} else if err := adm.CreateSubscriptionGroup(ctx, spec); err != nil {
			if errors.Is(err, client.ErrGroupExists) {
				return fmt.Errorf("group %q already exists (change it with 'bolide group update')", group)
			}
			return err
		}
		got, err := adm.SubscriptionGroup(ctx, group)
		if err != nil {
			return err
		}
		j := toSubGroupJSON(got[0])
		j.Broker = ""
		for _, g := range got {
			j.Brokers = append(j.Brokers, g.BrokerName)
		}
		if a.json() {
			return a.emit(j)
		}
		verb := "created"
		if update {
			verb = "updated"
		}
		fifoText := ""
		if j.FIFO {
			fifoText = "FIFO, "
		}
		fmt.Fprintf(a.stdout, "%s group %s on %s (%s%d delivery attempts, backoff %s)\n", verb, group,
			strings.Join(j.Brokers, ", "), fifoText, j.MaxDeliveryAttempts, backoffText(j))
		switch {
		case !j.ConsumeEnable:
			fmt.Fprintf(a.stdout, "consumption of group %s is disabled: its consumers receive nothing until 'bolide group update %s --consume-enable'\n", group, group)
		case update && cmd.Flags().Changed("consume-enable"):
			fmt.Fprintf(a.stdout, "consumption of group %s is enabled: its consumers resume where they stopped\n", group)
		}
		return nil
	}
	fs := c.Flags()
	fs.BoolVar(&fifo, "fifo", false, "FIFO: a queue's next messages wait until the previous ones are acknowledged")
	fs.IntVar(&attempts, "max-delivery-attempts", client.DefaultMaxDeliveryAttempts, "deliveries before a message goes to %DLQ%GROUP")
	fs.StringVar(&backoff, "retry-backoff", "", "waits before the 1st, 2nd, ... redelivery, comma-separated (e.g. 1s,5s,10s)")
	fs.StringVar(&cluster, "cluster", "", "only the masters of this cluster")
	fs.StringVar(&brokers, "broker", "", "only these broker groups (comma-separated)")
	fs.BoolVar(&consume, "consume-enable", true, "false: stop the group (its pulls and receives are refused, offsets kept); true: start it again")
	return c
}

func newGroupGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "get GROUP",
		Short: "Show a subscription group's declaration on each broker group",
		Long: `Show how each broker group that declares the group treats it: FIFO, maximum delivery
attempts, retry policy and backoff, and whether consumption is enabled. A group declared
nowhere is an error (it consumes with the defaults: not FIFO, 17 attempts).`,
		Example:           "  bolide group get ledger\n  bolide group get ledger -o json",
		Args:              exactArgs(1, "a GROUP"),
		ValidArgsFunction: a.groupArgCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			group := args[0]
			if err := message.ValidateGroup(group); err != nil {
				return usageErrorf("%v", err)
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			gs, err := adm.SubscriptionGroup(ctx, group)
			if errors.Is(err, client.ErrGroupNotExist) {
				return fmt.Errorf("group %q is not declared on any broker (declare it with 'bolide group create')", group)
			}
			if err != nil {
				return err
			}
			t := newTable("GROUP", "BROKER", "FIFO", "MAX ATTEMPTS", "RETRY POLICY", "BACKOFF", "CONSUME")
			for _, g := range gs {
				j := toSubGroupJSON(g)
				if a.json() {
					if err := a.emit(j); err != nil {
						return err
					}
					continue
				}
				consume := "enabled"
				if !j.ConsumeEnable {
					consume = "disabled"
				}
				t.row(j.Group, j.Broker, j.FIFO, j.MaxDeliveryAttempts, j.RetryPolicy, backoffText(j), consume)
			}
			if a.json() {
				return nil
			}
			return t.write(a.stdout)
		},
	}
}

func newGroupDeleteCmd(a *app) *cobra.Command {
	var clean bool
	c := &cobra.Command{
		Use:   "delete GROUP",
		Short: "Remove a subscription group's declaration (and with --clean-offsets its offsets)",
		Long: `Remove a subscription group's declaration from every master that has it: the group then
consumes with the defaults. --clean-offsets removes its consumer offsets too. A group
declared nowhere is an error.`,
		Example:           "  bolide group delete ledger\n  bolide group delete old-billing --clean-offsets -o json",
		Args:              exactArgs(1, "a GROUP"),
		ValidArgsFunction: a.groupArgCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			group := args[0]
			if err := message.ValidateGroup(group); err != nil {
				return usageErrorf("%v", err)
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			if err := adm.DeleteSubscriptionGroup(ctx, group, clean); err != nil {
				if errors.Is(err, client.ErrGroupNotExist) {
					return fmt.Errorf("group %q is not declared on any broker", group)
				}
				return err
			}
			if a.json() {
				return a.emit(map[string]any{"group": group, "deleted": true, "offsetsCleaned": clean})
			}
			fmt.Fprintf(a.stdout, "deleted group %s\n", group)
			return nil
		},
	}
	c.Flags().BoolVar(&clean, "clean-offsets", false, "also remove the group's consumer offsets")
	return c
}
