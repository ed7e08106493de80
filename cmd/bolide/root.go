package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/cmd/internal/daemon"
)

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "bolide",
		Short: "Manage and use a Bolide cluster: topics, messages, consumer groups, benchmarks",
		Long: `bolide talks to a Bolide cluster through its NameServers: it manages topics, sends and
consumes messages, finds messages by key or id, shows consumer lag, resets offsets and
benchmarks the cluster.

Output is a table for people; with -o json every line of stdout is one JSON object and
nothing else is printed there. Errors are one line "bolide: <error>" on stderr; the exit
status is 1 for a failure, 2 for a bad command line, 130 when interrupted.

Times (--from, --since, --begin, --end, --to-time) are RFC 3339 ("2026-01-02T15:04:05Z",
"2026-01-02 15:04:05" local), relative ("15m" or "-15m": that long ago; "+1h": from now;
units ns us ms s m h d), "now", or epoch milliseconds.`,
		Example: `  bolide topic create orders --queues 8
  bolide send --topic orders --tag paid --keys order-42 'hello'
  bolide consume --topic orders --group billing
  bolide msg query --topic orders --key order-42
  bolide group lag billing -o json
  BOLIDE_NAMESRV='10.0.0.1:9876;10.0.0.2:9876' bolide cluster list`,
		Version:       daemon.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          subcommandArgs,
		RunE:          showHelp,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return a.validateGlobals()
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetVersionTemplate("bolide {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVarP(&a.namesrv, "namesrv", "n", envOr(envNameServer, defaultNameServer),
		"NameServer addresses, separated by ';' or ',' (env "+envNameServer+")")
	pf.StringVarP(&a.output, "output", "o", outputTable, "output format: table or json (one JSON object per line)")
	pf.DurationVar(&a.timeout, "timeout", defaultTimeout, "how long to wait for the cluster to answer a request")
	pf.BoolVarP(&a.verbose, "verbose", "v", false, "log what the client does on stderr")
	// The security flags take their environment variables in the pre-run
	// (validateSecurity), not as defaults: --help must not print a secret.
	pf.StringVar(&a.accessKey, "access-key", "",
		"access key to sign every request with, for a cluster with ACL on (env "+envAccessKey+")")
	pf.StringVar(&a.secretKey, "secret-key", "",
		"secret key of --access-key (env "+envSecretKey+"; prefer the environment: a flag shows in ps)")
	pf.Var(boolString{&a.useTLS}, "tls", "connect with TLS (env "+envTLS+"=1); without --tls-ca the server is not verified")
	pf.Lookup("tls").NoOptDefVal = "true"
	pf.StringVar(&a.tlsCA, "tls-ca", "",
		"verify the servers' certificates with this CA bundle (PEM); implies --tls (env "+envTLSCA+")")
	pf.StringVar(&a.tlsServerName, "tls-server-name", "",
		"name to verify in the servers' certificates (default: each address's host); implies --tls (env "+envTLSServerName+")")
	pf.StringVar(&a.tlsCert, "tls-cert", "",
		"client certificate (PEM) to present to daemons that ask for one (--tls-client-auth); implies --tls (env "+envTLSCert+")")
	pf.StringVar(&a.tlsKey, "tls-key", "", "private key (PEM) of --tls-cert (env "+envTLSKey+")")
	_ = root.RegisterFlagCompletionFunc("output", fixedCompletion(outputTable, outputJSON))

	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	})
	root.AddCommand(
		newTopicCmd(a),
		newClusterCmd(a),
		newSendCmd(a),
		newConsumeCmd(a),
		newMsgCmd(a),
		newGroupCmd(a),
		newOffsetCmd(a),
		newBenchCmd(a),
		newTxnCmd(a),
		newBrokerCmd(a),
		newControllerCmd(a),
		newDLQCmd(a),
		newDelayCmd(a),
		newACLCmd(a),
		newCompletionCmd(),
	)
	root.SetHelpCommand(newHelpCmd(root))
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	return root
}

// groupCmd is a command that only holds subcommands.
func groupCmd(use, short, example string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args:    subcommandArgs,
		RunE:    showHelp,
	}
	c.AddCommand(subs...)
	return c
}

// subcommandArgs rejects an unknown subcommand of a command that only
// holds subcommands (cobra would print the help and exit 0).
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if sug := cmd.SuggestionsFor(args[0]); len(sug) > 0 {
		return usageErrorf("unknown command %q for %q (did you mean %q?)", args[0], cmd.CommandPath(), sug[0])
	}
	return usageErrorf("unknown command %q for %q (commands: %s)", args[0], cmd.CommandPath(), strings.Join(names, ", "))
}

func showHelp(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// isCobraUsageError recognises the usage errors cobra returns as plain
// errors.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "required flag", "unknown flag", "unknown shorthand flag",
		"invalid argument", "accepts ", "requires ", "flag needs an argument", "if any flags in the group",
		"none of the others can be", "at least one of the flags"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// exactArgs is cobra.ExactArgs with a usage error naming the arguments.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			if n == 0 {
				return usageErrorf("%s takes no arguments, got %q", cmd.CommandPath(), args)
			}
			return usageErrorf("%s needs %s (got %d argument(s); see '%s --help')", cmd.CommandPath(), names, len(args), cmd.CommandPath())
		}
		return nil
	}
}

func newHelpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:     "help [command]",
		Short:   "Help about any command",
		Example: "  bolide help topic create\n  bolide topic create --help",
		RunE: func(_ *cobra.Command, args []string) error {
			c, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return usageErrorf("unknown help topic %q", strings.Join(args, " "))
			}
			return c.Help()
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			c, _, err := root.Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []string
			for _, s := range c.Commands() {
				if s.IsAvailableCommand() {
					out = append(out, s.Name()+"\t"+s.Short)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
	}
}

func newCompletionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Long: `Print a completion script for your shell. Completion covers commands, flags, and
topic names (asked from the cluster).`,
		Example: `  bolide completion bash > /etc/bash_completion.d/bolide  # bash, for good
  source <(bolide completion bash)                       # bash, this shell
  bolide completion zsh > "${fpath[1]}/_bolide"           # zsh
  bolide completion fish > ~/.config/fish/completions/bolide.fish`,
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Args:      exactArgs(1, "a shell: bash, zsh, fish or powershell"),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(out)
			}
			return usageErrorf("unknown shell %q: want bash, zsh, fish or powershell", args[0])
		},
	}
}

// fixedCompletion completes a flag from a fixed list.
func fixedCompletion(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// topicCompletion completes topic names from the cluster.
func (a *app) topicCompletion(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	if a.validateGlobals() != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	adm, err := a.adminClient()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := a.opCtx()
	defer cancel()
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return topics, cobra.ShellCompDirectiveNoFileComp
}

// topicArgCompletion completes the first positional argument as a topic.
func (a *app) topicArgCompletion(cmd *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.topicCompletion(cmd, args, s)
}

// boolString is a boolean flag kept as text, checked by validateSecurity:
// its default comes from the environment, where a bad value must be a
// usage error rather than a panic at start.
type boolString struct{ s *string }

func (b boolString) String() string {
	if b.s == nil {
		return ""
	}
	return *b.s
}

func (b boolString) Set(v string) error { *b.s = v; return nil }
func (b boolString) Type() string       { return "bool" }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
