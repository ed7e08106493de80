// Command bolide is Bolide's command-line tool: it manages topics, sends and
// consumes messages, looks messages up, shows consumer lag, resets offsets
// and benchmarks a cluster, all through the Go SDK (package client).
//
//	bolide topic create orders --queues 8
//	bolide send --topic orders --tag paid --keys order-42 'hello'
//	bolide consume --topic orders --group billing
//	bolide msg query --topic orders --key order-42
//	bolide group lag billing
//
// Output is a table for people, or with -o json one JSON object per line
// and nothing else on stdout. A failure prints one line "bolide: <error>"
// on stderr and exits 1 (2 for a usage error such as a bad flag, 130 when
// interrupted). docs/CLI.md has every command with real output.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status. SIGINT and
// SIGTERM cancel the command's context: long-running commands (consume,
// bench) stop cleanly and commit, others fail with "interrupted".
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := newApp(ctx, stdin, stdout, stderr)
	defer a.close()
	root := newRootCmd(a)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitFailed
	var ue *usageError
	switch {
	case errors.As(err, &ue) || isCobraUsageError(err):
		code = exitUsage
	case ctx.Err() != nil && !a.handledInterrupt:
		code = exitInterrupted
		err = errors.New("interrupted")
	}
	a.printError(err)
	return code
}
