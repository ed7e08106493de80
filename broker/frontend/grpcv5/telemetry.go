package grpcv5

import (
	"context"
	"errors"
	"io"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/wire"
)

// telemetryStream is one open Telemetry stream of a client.
type telemetryStream struct {
	opened time.Time
}

// Telemetry is the client's long-lived stream (one per client and broker).
// Client → broker: Settings (at start, then every 5 minutes), answers to
// print-thread-stack and verify-message commands (the broker sends
// neither; answers are logged and dropped). Broker → client: the full
// server Settings in reply to each Settings, of the same pub_sub kind, and
// RecoverOrphanedTransactionCommand for the transaction check-backs of a
// producer's topics.
//
// The stream ends when the client ends it, when the client is dropped
// (NotifyClientTermination, expiry) or when the broker stops. Settings
// without publishing or subscription, or with illegal names, end it with
// gRPC INVALID_ARGUMENT, as Apache's proxy does.
func (s *Service) Telemetry(stream v2.MessagingService_TelemetryServer) error {
	ctx := stream.Context()
	m := readMeta(ctx)
	if m.clientID == "" {
		return status.Errorf(codes.InvalidArgument, "header %s is required", headerClientID)
	}
	c := s.clients.touch(m)
	st := &telemetryStream{opened: time.Now()}
	c.attach(st)
	defer c.detach(st)

	// Recv runs in its own goroutine so that the loop below can also wait
	// for notices. It ends at the first error, which comes at the latest
	// when this handler returns (gRPC then ends the stream).
	in := make(chan *v2.TelemetryCommand)
	recvErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			cmd, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case in <- cmd:
			case <-done:
				return
			}
		}
	}()

	for {
		notices, changed := c.noticesFor(st)
		select {
		case cmd := <-in:
			reply, err := s.telemetryCommand(ctx, m, c, cmd)
			if reply != nil {
				if err := stream.Send(reply); err != nil {
					return err
				}
			}
			if err != nil {
				return err
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case n := <-notices:
			if cmd := s.noticeCommand(ctx, c, n); cmd != nil {
				if err := stream.Send(cmd); err != nil {
					return err
				}
			}
		case <-changed:
		case <-c.gone:
			return nil
		case <-s.b.Stopping():
			return status.Error(codes.Unavailable, "the broker is stopping")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// telemetryCommand handles one command from the client and returns the
// reply to write (nil: none). An error ends the stream, after the reply.
// Settings the caller may not use (ACL on) are refused: the reply carries
// the refusal's status and the stream ends (auth.go).
func (s *Service) telemetryCommand(ctx context.Context, m callMeta, c *client, cmd *v2.TelemetryCommand) (*v2.TelemetryCommand, error) {
	s.clients.touch(m)
	switch x := cmd.GetCommand().(type) {
	case *v2.TelemetryCommand_Settings:
		if err := s.authorizeSettings(ctx, x.Settings); err != nil {
			return refusal(err)
		}
		merged, err := s.applySettings(m, c, x.Settings)
		if err != nil {
			return nil, status.Errorf(grpcCodeOf(err), "settings of client %s refused: %v", c.id, err)
		}
		return &v2.TelemetryCommand{Status: okStatus(), Command: &v2.TelemetryCommand_Settings{Settings: merged}}, nil
	case *v2.TelemetryCommand_ThreadStackTrace:
		s.log.Debug("thread stack trace from client (not asked for)", zap.String("client", c.id),
			zap.String("nonce", x.ThreadStackTrace.GetNonce()), zap.Int("bytes", len(x.ThreadStackTrace.GetThreadStackTrace())))
	case *v2.TelemetryCommand_VerifyMessageResult:
		s.log.Debug("verify message result from client (not asked for)", zap.String("client", c.id),
			zap.String("nonce", x.VerifyMessageResult.GetNonce()), zap.Stringer("code", cmd.GetStatus().GetCode()))
	default:
		s.log.Debug("telemetry command ignored", zap.String("client", c.id), zap.String("command", cmd.String()))
	}
	return nil, nil
}

// grpcCodeOf is the gRPC code a Telemetry stream ends with for err:
// INVALID_ARGUMENT for the client's mistakes (4xxxx), INTERNAL otherwise,
// as Apache's proxy ends it.
func grpcCodeOf(err error) codes.Code {
	if c := codeOf(err); c >= v2.Code_BAD_REQUEST && c < v2.Code_INTERNAL_ERROR {
		return codes.InvalidArgument
	}
	return codes.Internal
}

// noticeCommand turns a session notice into the command that tells the
// client (nil: nothing to tell; a v5 client does not rebalance, so a
// group's member change is not). With ACL on, a transaction check-back
// (which carries the message) goes only to a stream whose caller may
// still publish to the topic: permissions changed since the stream
// opened apply.
func (s *Service) noticeCommand(ctx context.Context, c *client, n broker.Notice) *v2.TelemetryCommand {
	if n.CheckTransaction == nil {
		return nil
	}
	if s.guard.Enabled() {
		if err := s.guard.Authorize(auth.FromContext(ctx), wire.CallPeer(ctx), auth.TopicNeed(n.CheckTransaction.Topic, auth.Pub)); err != nil {
			s.log.Debug("transaction check not sent: the client may not publish to the topic", zap.String("client", c.id),
				zap.String("topic", n.CheckTransaction.Topic), zap.Error(err))
			return nil
		}
	}
	c.mu.Lock()
	ns := c.namespace
	c.mu.Unlock()
	cmd, err := s.recoverCommand(n.CheckTransaction, ns)
	if err != nil {
		s.log.Warn("transaction check not sent", zap.String("client", c.id), zap.String("group", n.CheckTransaction.Group),
			zap.String("id", n.CheckTransaction.TransactionID), zap.Error(err))
		return nil
	}
	return &v2.TelemetryCommand{Command: &v2.TelemetryCommand_RecoverOrphanedTransactionCommand{RecoverOrphanedTransactionCommand: cmd}}
}
