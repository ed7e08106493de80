package daemon

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

// TestCommandExecute: a daemon's root command serves with the options its
// Load resolved and exits with Serve's status; a refused configuration or
// an argument exits ExitConfig with the error after the daemon's name.
func TestCommandExecute(t *testing.T) {
	newCmd := func(code *int, loadErr error, served *string) *cobra.Command {
		level, format := "error", "console"
		var name string
		cmd := Command[string]{
			Name: "bolide-test", Short: "a test daemon",
			LogLevel: &level, LogFormat: &format,
			Load: func(cmd *cobra.Command) (string, *Config, error) {
				if loadErr != nil {
					return "", nil, loadErr
				}
				cfg := BindCommand(cmd, "BOLIDE_TEST")
				return name, cfg, cfg.Load("")
			},
			Applied: func(string) Applied { return Applied{} },
			Serve: func(o string, lg *zap.Logger) int {
				*served = o
				return ExitFailed
			},
		}.New(code)
		cmd.Flags().StringVar(&name, "name", "", "")
		return cmd
	}
	var out, errOut bytes.Buffer
	code, served := ExitOK, ""
	if got := Execute("bolide-test", newCmd(&code, nil, &served), &code, []string{"--name", "x"}, &out, &errOut); got != ExitFailed || served != "x" {
		t.Errorf("served %q, exit %d; want x, %d (%s)", served, got, ExitFailed, errOut.String())
	}
	errOut.Reset()
	code, served = ExitOK, ""
	got := Execute("bolide-test", newCmd(&code, errors.New("bad listen address"), &served), &code, nil, &out, &errOut)
	if got != ExitConfig || served != "" || !strings.Contains(errOut.String(), "bolide-test: bad listen address") {
		t.Errorf("refused configuration: exit %d, served %q, stderr %q", got, served, errOut.String())
	}
	errOut.Reset()
	code = ExitOK
	if got := Execute("bolide-test", newCmd(&code, nil, &served), &code, []string{"extra"}, &out, &errOut); got != ExitConfig {
		t.Errorf("an argument: exit %d, want %d", got, ExitConfig)
	}
}
