package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/bolide-mq/bolide/client"
)

// Output formats.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// Defaults of the global flags.
const (
	defaultNameServer = "127.0.0.1:9876"
	defaultTimeout    = 10 * time.Second
	envNameServer     = "BOLIDE_NAMESRV"
	envAccessKey      = "BOLIDE_ACCESS_KEY"
	envSecretKey      = "BOLIDE_SECRET_KEY"
	envTLS            = "BOLIDE_TLS"
	envTLSCA          = "BOLIDE_TLS_CA"
	envTLSServerName  = "BOLIDE_TLS_SERVER_NAME"
	envTLSCert        = "BOLIDE_TLS_CERT"
	envTLSKey         = "BOLIDE_TLS_KEY"
)

// app is what every command shares: the streams, the global flags and the
// clients opened for the command (closed by close).
type app struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	// Global flags.
	namesrv string
	output  string
	timeout time.Duration
	verbose bool

	// Security flags: the credentials every call is signed with, and TLS.
	accessKey     string
	secretKey     string
	useTLS        string // parsed into tlsConfig: a boolean, from --tls or BOLIDE_TLS
	tlsCA         string
	tlsServerName string
	tlsCert       string // client certificate, for daemons with --tls-client-auth
	tlsKey        string

	nameServers []string    // parsed from namesrv by the root's pre-run
	tlsConfig   *tls.Config // nil: plain text; set by the root's pre-run

	// handledInterrupt is set by commands that treat SIGINT as a normal
	// end (consume, bench) so that run does not report "interrupted".
	handledInterrupt bool

	mu      sync.Mutex
	admin   *client.Admin
	closers []func() error
}

func newApp(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
}

// json reports whether -o json was given.
func (a *app) json() bool { return a.output == outputJSON }

// validateGlobals checks the global flags; it runs before every command.
func (a *app) validateGlobals() error {
	switch a.output {
	case outputTable, outputJSON:
	default:
		return usageErrorf("-o/--output must be %q or %q, not %q", outputTable, outputJSON, a.output)
	}
	if a.timeout <= 0 {
		return usageErrorf("--timeout must be positive, not %v", a.timeout)
	}
	a.nameServers = splitList(a.namesrv)
	if len(a.nameServers) == 0 {
		return usageErrorf("--namesrv is empty (give host:port, several separated by ';' or ',')")
	}
	for _, ns := range a.nameServers {
		if err := checkHostPort(ns); err != nil {
			return usageErrorf("--namesrv: %v", err)
		}
	}
	return a.validateSecurity()
}

// validateSecurity checks the credentials and TLS flags and builds the TLS
// configuration: --tls-ca, --tls-server-name and --tls-cert imply --tls; without
// --tls-ca the server's certificate is not verified (as RocketMQ's
// clients do): the connection is encrypted, not authenticated.
func (a *app) validateSecurity() error {
	for _, f := range []struct {
		v   *string
		env string
	}{{&a.accessKey, envAccessKey}, {&a.secretKey, envSecretKey}, {&a.useTLS, envTLS}, {&a.tlsCA, envTLSCA},
		{&a.tlsServerName, envTLSServerName}, {&a.tlsCert, envTLSCert}, {&a.tlsKey, envTLSKey}} {
		if *f.v == "" {
			*f.v = os.Getenv(f.env)
		}
	}
	if (a.accessKey == "") != (a.secretKey == "") {
		return usageErrorf("--access-key and --secret-key (or %s and %s) go together: give both or neither", envAccessKey, envSecretKey)
	}
	on := false
	if a.useTLS != "" {
		v, err := strconv.ParseBool(a.useTLS)
		if err != nil {
			return usageErrorf("--tls (or %s) must be true or false, not %q", envTLS, a.useTLS)
		}
		on = v
	}
	if (a.tlsCert == "") != (a.tlsKey == "") {
		return usageErrorf("--tls-cert and --tls-key (or %s and %s) go together: give both or neither", envTLSCert, envTLSKey)
	}
	a.tlsConfig = nil
	if !on && a.tlsCA == "" && a.tlsServerName == "" && a.tlsCert == "" {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.tlsServerName}
	if a.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(a.tlsCert, a.tlsKey)
		if err != nil {
			return usageErrorf("--tls-cert/--tls-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if a.tlsCA == "" {
		cfg.InsecureSkipVerify = true
	} else {
		pem, err := os.ReadFile(a.tlsCA)
		if err != nil {
			return usageErrorf("--tls-ca: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return usageErrorf("--tls-ca: %s holds no PEM certificate", a.tlsCA)
		}
	}
	a.tlsConfig = cfg
	return nil
}

// logger is the SDK's logger: silent unless --verbose, then info and above
// on stderr.
func (a *app) logger() *zap.Logger {
	if !a.verbose {
		return zap.NewNop()
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(a.stderr), zapcore.InfoLevel)
	return zap.New(core)
}

// clientOption holds the SDK options every client of a command gets.
func (a *app) clientOption() client.Option {
	return client.WithOptions(
		client.WithNameServers(a.nameServers...),
		client.WithRPCTimeout(a.timeout),
		client.WithLogger(a.logger()),
		client.WithCredentials(a.accessKey, a.secretKey),
		client.WithTLS(a.tlsConfig),
	)
}

// producerOptions are a producer's: clientOption, each send attempt bounded
// by --timeout, and extra.
func (a *app) producerOptions(extra ...client.ProducerOption) []client.ProducerOption {
	return append([]client.ProducerOption{a.clientOption(), client.WithSendTimeout(a.timeout)}, extra...)
}

// consumerOptions are a consumer's: clientOption and extra.
func (a *app) consumerOptions(extra ...client.ConsumerOption) []client.ConsumerOption {
	return append([]client.ConsumerOption{a.clientOption()}, extra...)
}

// adminClient returns the command's Admin, creating it on first use.
func (a *app) adminClient() (*client.Admin, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.admin != nil {
		return a.admin, nil
	}
	adm, err := client.NewAdmin(a.clientOption())
	if err != nil {
		return nil, err
	}
	a.admin = adm
	a.closers = append(a.closers, adm.Close)
	return adm, nil
}

// onClose registers a function close calls (in reverse order).
func (a *app) onClose(f func() error) {
	a.mu.Lock()
	a.closers = append(a.closers, f)
	a.mu.Unlock()
}

// close closes every client the command opened.
func (a *app) close() {
	a.mu.Lock()
	cs := a.closers
	a.closers = nil
	a.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		_ = cs[i]()
	}
}

// opCtx bounds one request (or one short series of requests) by --timeout.
func (a *app) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(a.ctx, a.timeout)
}

// info prints an informational line on stderr (table output only: with
// -o json stderr carries nothing but errors and progress is off).
func (a *app) info(format string, args ...any) {
	if a.json() {
		return
	}
	fmt.Fprintf(a.stderr, format+"\n", args...)
}

// warn prints a warning on stderr whatever the output format.
func (a *app) warn(format string, args ...any) {
	fmt.Fprintf(a.stderr, "bolide: warning: "+format+"\n", args...)
}

// printError prints err as the one line "bolide: <error>".
func (a *app) printError(err error) {
	fmt.Fprintln(a.stderr, "bolide: "+a.describeError(err))
}

// describeError turns an error into one readable line: SDK and gRPC
// errors are long chains, so the common cases get a short explanation.
func (a *app) describeError(err error) string {
	var te *topicError
	switch {
	case errors.As(err, &te) && errors.Is(err, client.ErrTopicNotExist):
		// The NameServers forget the topics of a broker that is down, so
		// the truth is about the registered brokers only.
		return fmt.Sprintf("topic %q does not exist on any registered broker (see 'bolide topic list' and 'bolide cluster list')", te.topic)
	case errors.As(err, &te) && errors.Is(err, client.ErrTopicExists):
		return fmt.Sprintf("topic %q already exists (change it with 'bolide topic update')", te.topic)
	case errors.Is(err, client.ErrUnauthenticated) && a.accessKey == "":
		return oneLine(err.Error()) + fmt.Sprintf(" (the cluster runs with ACL on: give --access-key and --secret-key, or set %s and %s)", envAccessKey, envSecretKey)
	case strings.Contains(err.Error(), "accepts TLS only"):
		return fmt.Sprintf("the cluster accepts TLS only (--tls-mode enforcing): give --tls, with --tls-ca to verify its certificate (or set %s=1 and %s)",
			envTLS, envTLSCA)
	case a.tlsConfig != nil && tlsFailure(err) && strings.Contains(err.Error(), "certificate required"):
		return fmt.Sprintf("TLS failed: %s (the server asks for a client certificate: give --tls-cert and --tls-key, or set %s and %s)",
			tlsCause(err), envTLSCert, envTLSKey)
	case a.tlsConfig != nil && tlsFailure(err):
		return fmt.Sprintf("TLS with %s failed: %s (--tls-ca must hold the CA that signed the servers' certificates; --tls-server-name the name they carry)",
			strings.Join(a.nameServers, ";"), tlsCause(err))
	case unreachable(err):
		return fmt.Sprintf("cannot reach the NameServer at %s: %s (is it running? set --namesrv or %s)",
			strings.Join(a.nameServers, ";"), transportCause(err, a.timeout), envNameServer)
	case errors.Is(err, context.DeadlineExceeded) && strings.Contains(err.Error(), "NameServer "):
		return fmt.Sprintf("the NameServer at %s did not answer within %v (is it running? raise --timeout, or set --namesrv or %s)",
			strings.Join(a.nameServers, ";"), a.timeout, envNameServer)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("timed out after %v (raise --timeout): %s", a.timeout, oneLine(err.Error()))
	}
	return oneLine(err.Error())
}

// topicError marks an error that concerns one topic, so that "no route"
// answers can name it.
type topicError struct {
	topic string
	err   error
}

func (e *topicError) Error() string { return e.err.Error() }
func (e *topicError) Unwrap() error { return e.err }

// forTopic wraps err (nil stays nil) with the topic it concerns.
func forTopic(topic string, err error) error {
	if err == nil {
		return nil
	}
	return &topicError{topic: topic, err: err}
}

// tlsFailure reports whether err is a failed TLS handshake.
func tlsFailure(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "tls: ") || strings.Contains(msg, "x509: ") || strings.Contains(msg, "authentication handshake failed")
}

// tlsCause is the TLS part of a failed handshake's error ("tls: failed to
// verify certificate: ...").
func tlsCause(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "tls: "); i >= 0 {
		msg = msg[i:]
		if j := strings.IndexAny(msg, "\"\n"); j >= 0 {
			msg = msg[:j]
		}
	}
	return oneLine(msg)
}

// unreachable reports whether err says that no NameServer answered.
func unreachable(err error) bool {
	return errors.Is(err, client.ErrNoNameServer) && !errors.Is(err, client.ErrTopicNotExist)
}

// transportCause extracts why a peer could not be reached from a gRPC
// error chain.
func transportCause(err error, timeout time.Duration) string {
	msg := err.Error()
	for _, c := range []string{"connection refused", "no such host", "network is unreachable", "no route to host",
		"connection reset by peer"} {
		if strings.Contains(msg, c) {
			return c
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "DeadlineExceeded") {
		return fmt.Sprintf("no answer within %v", timeout)
	}
	// The description of the first gRPC status in the chain.
	if _, desc, ok := strings.Cut(msg, "desc = "); ok {
		desc, _, _ = strings.Cut(desc, "; ")
		return oneLine(desc)
	}
	return oneLine(msg)
}

// oneLine folds a possibly multi-line message (errors.Join, cobra's
// suggestions) into one line.
func oneLine(s string) string {
	s = strings.Replace(s, "\n\nDid you mean this?\n", " (did you mean: ", 1)
	if i := strings.Index(s, "(did you mean: "); i >= 0 {
		head, tail := s[:i], s[i:]
		tail = strings.Join(strings.Fields(tail), " ")
		s = head + strings.TrimSuffix(tail, " ") + "?)"
		s = strings.Replace(s, "(did you mean: ", "(did you mean ", 1)
	}
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// usageError is a bad command line: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// isTerminal reports whether w is a terminal (progress lines are redrawn
// in place on a terminal and printed one per line otherwise).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
