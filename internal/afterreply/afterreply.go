// Package afterreply lets the handler of a request leave work to be done
// once its answer is on its way to the client.
//
// A server that serves requests on a connection's reader goroutine and
// writes their answers out together when the client waits (the frame
// protocol's server does) puts a Queue in the context of those requests.
// A handler deep below — the store, after a put — calls Defer: the work
// runs on the same goroutine right after the answers are flushed, or
// before the next request is read when more are already buffered, so it
// neither delays the answer nor needs a hand-off to another goroutine.
// Without a Queue in the context, Defer reports false and the caller does
// the work itself.
package afterreply

import "context"

// Queue holds the deferred work of one connection. It belongs to the
// connection's reader goroutine: Defer and Run are called on it only.
type Queue struct {
	fns []func()
}

type key struct{}

// NewContext returns ctx carrying q.
func NewContext(ctx context.Context, q *Queue) context.Context {
	return context.WithValue(ctx, key{}, q)
}

// Defer queues fn on ctx's Queue and reports whether it did; when ctx has
// none, the caller must run fn itself.
func Defer(ctx context.Context, fn func()) bool {
	q, _ := ctx.Value(key{}).(*Queue)
	if q == nil {
		return false
	}
	q.fns = append(q.fns, fn)
	return true
}

// Run runs the queued work in order and empties the queue; work queued
// while it runs runs too.
func (q *Queue) Run() {
	for i := 0; i < len(q.fns); i++ {
		q.fns[i]()
		q.fns[i] = nil
	}
	q.fns = q.fns[:0]
}
