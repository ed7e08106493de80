package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// sendMux multiplexes the sends to one broker address over one
// Broker.SendStream: each request carries an id, a waiter per id receives
// the matching response. A broken stream fails its waiters (the send retry
// logic decides what to do) and the next send opens a new one. A broker
// without SendStream is sent to with unary calls. With the frame transport
// (the default) sends go over the client's frame connection to the broker
// instead, which multiplexes them the same way; the stream is used only
// for a broker that does not speak the frame protocol.
type sendMux struct {
	addr   string
	client *brokerClient
	parent context.Context
	goRun  func(func()) bool
	log    *zap.Logger
	nextID atomic.Uint64

	packs packSupport // whether the broker reads packed sends

	mu    sync.Mutex
	cur   *sendConn
	unary bool
}

type sendConn struct {
	stream grpc.BidiStreamingClient[pb.SendRequest, pb.SendResponse]
	cancel context.CancelFunc

	// Lock order: sendMu and mu are never held together (do registers the
	// waiter under mu, then sends under sendMu). teardown releases
	// sendMux.mu before it takes mu, and replies are sent to the waiters'
	// channels after mu is released.
	sendMu sync.Mutex // stream.Send is not safe for concurrent use

	mu      sync.Mutex
	waiters map[uint64]chan sendReply
	err     error // set once the stream is broken
}

type sendReply struct {
	resp *pb.SendResponse
	err  error
}

// do sends req and waits for its response, within ctx and timeout (none
// when 0: a send past it fails with context.DeadlineExceeded); with oneway
// it returns once the request is written.
func (m *sendMux) do(ctx context.Context, timeout time.Duration, req *pb.SendRequest, oneway bool) (*pb.SendResponse, error) {
	if resp, ok, err := m.client.sendFrame(ctx, timeout, req, oneway, &m.packs); ok {
		return resp, err
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	c, unary, err := m.conn()
	if err != nil {
		return nil, err
	}
	if unary {
		return m.client.Send(ctx, req)
	}
	req.RequestId = m.nextID.Add(1)
	var ch chan sendReply
	if !oneway {
		ch = make(chan sendReply, 1)
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return nil, &streamError{addr: m.addr, err: c.err}
		}
		c.waiters[req.RequestId] = ch
		c.mu.Unlock()
	}
	c.sendMu.Lock()
	err = c.stream.Send(req)
	c.sendMu.Unlock()
	if errors.Is(err, io.EOF) && !oneway {
		// The broker ended the stream (a refusal of the caller's
		// credentials ends it at once): why comes from Recv, and the
		// receive loop fails every waiter with it.
		select {
		case r := <-ch:
			return r.resp, r.err
		case <-ctx.Done():
			c.unregister(req.RequestId)
			return nil, ctx.Err()
		}
	}
	if err != nil {
		c.unregister(req.RequestId)
		m.teardown(c, err)
		return nil, &streamError{addr: m.addr, err: err}
	}
	if oneway {
		return nil, nil
	}
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		c.unregister(req.RequestId)
		return nil, ctx.Err()
	}
}

// conn returns the current stream, opening one when there is none.
func (m *sendMux) conn() (*sendConn, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unary {
		return nil, true, nil
	}
	if m.cur != nil {
		return m.cur, false, nil
	}
	if m.parent.Err() != nil {
		return nil, false, ErrClosed
	}
	sctx, cancel := context.WithCancel(m.parent)
	stream, err := m.client.SendStream(sctx)
	if err != nil {
		cancel()
		return nil, false, fmt.Errorf("open send stream to %s: %w", m.addr, err)
	}
	c := &sendConn{stream: stream, cancel: cancel, waiters: make(map[uint64]chan sendReply)}
	if !m.goRun(func() { m.recvLoop(c) }) {
		cancel()
		return nil, false, ErrClosed
	}
	m.cur = c
	return c, false, nil
}

func (m *sendMux) recvLoop(c *sendConn) {
	for {
		resp, err := c.stream.Recv()
		if err != nil {
			m.teardown(c, err)
			return
		}
		c.mu.Lock()
		ch := c.waiters[resp.GetRequestId()]
		delete(c.waiters, resp.GetRequestId())
		c.mu.Unlock()
		if ch != nil {
			ch <- sendReply{resp: resp}
		}
	}
}

// teardown retires a broken stream and fails everything waiting on it.
func (m *sendMux) teardown(c *sendConn, err error) {
	m.mu.Lock()
	if m.cur == c {
		m.cur = nil
	}
	if status.Code(err) == codes.Unimplemented {
		m.unary = true
		m.log.Info("broker has no SendStream, using unary sends", zap.String("broker", m.addr))
	}
	m.mu.Unlock()

	c.mu.Lock()
	first := c.err == nil
	if first {
		c.err = err
	}
	waiters := c.waiters
	c.waiters = make(map[uint64]chan sendReply)
	c.mu.Unlock()
	c.cancel()
	if first && m.parent.Err() == nil {
		m.log.Debug("send stream closed", zap.String("broker", m.addr), zap.Error(err))
	}
	for _, ch := range waiters {
		ch <- sendReply{err: &streamError{addr: m.addr, err: err}}
	}
}

func (c *sendConn) unregister(id uint64) {
	c.mu.Lock()
	delete(c.waiters, id)
	c.mu.Unlock()
}
