package daemon

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

// Exit statuses of the daemons.
const (
	ExitOK     = 0
	ExitFailed = 1 // start or stop failed
	ExitConfig = 2 // bad flags or configuration
)

// Command is what a daemon's root command does with its resolved flags:
// New builds the command around it, and each daemon adds its own flags.
type Command[O any] struct {
	Name  string // the executable's name, e.g. "bolide-broker"
	Short string
	// LogLevel and LogFormat point at the --log-level and --log-format
	// values.
	LogLevel, LogFormat *string
	// Load resolves the flags, the environment and the configuration file
	// into the daemon's options.
	Load func(cmd *cobra.Command) (O, *Config, error)
	// Applied is what the security flags resolved to, announced at start.
	Applied func(O) Applied
	// Serve runs the daemon until a signal and returns its exit status.
	Serve func(O, *zap.Logger) int
}

// New returns the root command: it takes no arguments, and its RunE
// loads the options, makes the logger, logs the start with the
// configuration's sources, then serves, storing the exit status in *code.
// A refused configuration is RunE's error (see Execute).
func (c Command[O]) New(code *int) *cobra.Command {
	return &cobra.Command{
		Use:           c.Name,
		Short:         c.Short,
		Version:       Version,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, cfg, err := c.Load(cmd)
			if err != nil {
				return err
			}
			lg, err := NewLogger(*c.LogLevel, *c.LogFormat)
			if err != nil {
				return err
			}
			defer func() { _ = lg.Sync() }()
			lg.Info(c.Name+" starting", append([]zap.Field{zap.String("version", Version)}, cfg.LogFields()...)...)
			cfg.WarnIgnoredEnv(lg)
			c.Applied(opts).Announce(lg)
			*code = c.Serve(opts, lg)
			return nil
		},
	}
}

// Execute runs a daemon's root command (New's, with the daemon's flags)
// with args and returns the process's exit status: what RunE stored in
// *code, or ExitConfig, the error printed to stderr after the name, when
// the flags or the configuration were refused.
func Execute(name string, cmd *cobra.Command, code *int, args []string, stdout, stderr io.Writer) int {
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return ExitConfig
	}
	return *code
}
