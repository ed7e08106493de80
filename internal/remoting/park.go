package remoting

import (
	"sync"
	"time"

	"github.com/bolide-mq/bolide/internal/rawconn"
)

// parkedReq is a request Parker.Park holds; cancel is set under the
// connection's mu once Park returns.
type parkedReq struct{ cancel func() }

// park serves req with the handler's Park. It counts as a request in
// flight (served) until it is answered.
func (c *Conn) park(req *Command, size int) {
	p := &parkedReq{}
	c.mu.Lock()
	if c.parked == nil {
		c.parked = make(map[*parkedReq]struct{})
	}
	c.parked[p] = struct{}{}
	c.mu.Unlock()
	end := func() {
		c.mu.Lock()
		delete(c.parked, p)
		c.mu.Unlock()
		c.finished(size)
	}
	resp, cancel := c.pk.Park(c.ctx, c, req, func(resp *Command) { c.replyParked(req, resp, end) })
	if cancel == nil {
		end()
		if resp != nil && !req.IsOneway() {
			resp.Opaque = req.Opaque
			resp.Flag |= FlagResponse
			_ = c.write(resp, false) // the reader flushes before it waits
		}
		return
	}
	c.mu.Lock()
	p.cancel = cancel
	c.mu.Unlock()
	// A connection that ended while Park ran was not there to cancel it.
	if c.ctx.Err() != nil {
		cancel()
	}
}

// cancelParked cancels the parked requests: the connection has ended.
func (c *Conn) cancelParked() {
	c.mu.Lock()
	cancels := make([]func(), 0, len(c.parked))
	for p := range c.parked {
		if p.cancel != nil {
			cancels = append(cancels, p.cancel)
		}
	}
	c.mu.Unlock()
	for _, cancel := range cancels { // outside mu: they answer as they end
		cancel()
	}
}

// parkedBufs holds the buffers parked answers are encoded into.
var parkedBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// replyParked answers a parked request from the goroutine that ended it: a
// message's arrival reported by another connection's reader or by the
// broker's dispatcher, a timer. That goroutine must not wait for this peer
// to read, so it writes only what the socket takes at once and leaves the
// rest of the frame, and any answer it cannot write now, to a worker. end
// runs once the frame is written (or the connection broke).
func (c *Conn) replyParked(req, resp *Command, end func()) {
	if resp == nil || req.IsOneway() {
		end()
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag |= FlagResponse
	bp := parkedBufs.Get().(*[]byte)
	b := AppendFrame((*bp)[:0], resp)
	done := func() {
		if cap(b) <= 1<<20 {
			*bp = b[:0]
			parkedBufs.Put(bp)
		}
		end()
	}
	// Straight to the socket only when nothing is buffered: the buffer may
	// hold the first part of a frame whose rest must follow it.
	if c.raw == nil || !c.wmu.TryLock() {
		c.writeLater(b, done)
		return
	}
	switch {
	case c.ctx.Err() != nil:
		c.wmu.Unlock()
		done()
		return
	case c.bw.Buffered() > 0:
		c.wmu.Unlock()
		c.writeLater(b, done)
		return
	}
	n, err := rawconn.WriteNow(c.raw, b)
	if err != nil || n == len(b) {
		c.wmu.Unlock()
		if err != nil {
			c.fail(err)
		}
		done()
		return
	}
	// The socket is full: a worker writes the rest, holding wmu so that
	// nothing comes between the two parts of the frame.
	c.workers.Go(func() {
		_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		_, err := c.nc.Write(b[n:])
		c.wmu.Unlock()
		if err != nil {
			c.fail(err)
		}
		done()
	})
}

// writeLater has a worker write the frame b after what is buffered, then
// call done.
func (c *Conn) writeLater(b []byte, done func()) {
	c.workers.Go(func() {
		_ = c.writeFrame(b)
		done()
	})
}
