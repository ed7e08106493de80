package console

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
)

const apiPrefix = "/console/api/"

// call is one API request.
type call struct {
	w     http.ResponseWriter
	r     *http.Request
	admin *client.Admin
	user  user
}

// apiFunc answers a request: the value is written as JSON with status 200
// (created: 201); streamed means the handler wrote the answer itself.
type apiFunc func(ctx context.Context, c *call) (any, error)

type created struct{ v any }

type streamedT struct{}

var streamed = streamedT{}

// opts of a route.
type routeOpts struct {
	// stream: no request timeout (the handler bounds itself).
	stream bool
	// noAdmin: the handler needs no SDK client.
	noAdmin bool
}

func (c *Console) routes() {
	type m = map[string]apiFunc
	add := func(pattern string, methods m, ro routeOpts) {
		c.mux.Handle(apiPrefix+pattern, c.handler(methods, ro))
	}
	add("whoami", m{"GET": c.whoami}, routeOpts{noAdmin: true})
	add("cluster", m{"GET": c.cluster}, routeOpts{})
	add("topics", m{"GET": c.topics, "POST": c.createTopic}, routeOpts{})
	add("topics/{topic}", m{"GET": c.topic, "PUT": c.updateTopic}, routeOpts{})
	add("groups", m{"GET": c.groups}, routeOpts{})
	add("groups/{group}", m{"GET": c.group, "PUT": c.putGroup}, routeOpts{})
	add("groups/{group}/reset", m{"POST": c.resetGroup}, routeOpts{})
	add("messages", m{"GET": c.messages}, routeOpts{})
	add("messages/{id}", m{"GET": c.message}, routeOpts{})
	add("dlq", m{"GET": c.dlqGroups}, routeOpts{})
	add("dlq/{group}", m{"GET": c.deadLetters}, routeOpts{})
	add("dlq/{group}/export", m{"GET": c.exportDeadLetters}, routeOpts{stream: true})
	add("dlq/{group}/replay", m{"POST": c.replay}, routeOpts{stream: true})
	add("delay", m{"GET": c.delay}, routeOpts{})
	add("delay/cancel", m{"POST": c.cancelDelay}, routeOpts{})
	add("transactions", m{"GET": c.transactions}, routeOpts{})
	add("transactions/resolve", m{"POST": c.resolveTransaction}, routeOpts{})
	add("brokers/{name}/config", m{"GET": c.brokerConfig, "PUT": c.updateBrokerConfig}, routeOpts{})
	add("brokers/{name}/write-perm", m{"POST": c.writePerm}, routeOpts{})
	c.mux.HandleFunc(apiPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errcode.Errorf(errcode.RequestNotSupported, "no API at %s", r.URL.Path))
	})
}

// handler dispatches by method, guards mutations against cross-site
// requests, bounds the request and lends it the user's SDK client.
func (c *Console) handler(methods map[string]apiFunc, ro routeOpts) http.Handler {
	allow := make([]string, 0, len(methods))
	for m := range methods {
		allow = append(allow, m)
	}
	sort.Strings(allow)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fn, ok := methods[r.Method]
		if !ok {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: errorObj{
				Code: errcode.RequestNotSupported.String(), Message: r.Method + " " + r.URL.Path + ": the method is not allowed (" + strings.Join(allow, ", ") + ")"}})
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := checkMutation(r); err != nil {
				writeError(w, err)
				return
			}
		}
		ctx := r.Context()
		if !ro.stream {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
			defer cancel()
		}
		cl := &call{w: w, r: r, user: userOf(ctx)}
		if !ro.noAdmin {
			e, err := c.clients.acquire(cl.user)
			if err != nil {
				writeError(w, err)
				return
			}
			defer c.clients.release(e)
			cl.admin = e.admin
		}
		v, err := fn(ctx, cl)
		switch {
		case err != nil:
			c.log.Debug("console API request failed", zapReq(r, err)...)
			writeError(w, err)
		case v == streamed:
		default:
			if cr, ok := v.(created); ok {
				writeJSON(w, http.StatusCreated, cr.v)
				return
			}
			writeJSON(w, http.StatusOK, v)
		}
	})
}

// checkMutation is the CSRF guard: a cross-site form or image cannot set
// a custom header nor send a JSON content type without a preflight the
// console never grants.
func checkMutation(r *http.Request) error {
	if r.Header.Get("X-Bolide-Console") != "1" {
		return errcode.Errorf(errcode.NoPermission, "a console change needs the header X-Bolide-Console: 1")
	}
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return errcode.Errorf(errcode.NoPermission, "a console change needs Content-Type: application/json, not %q", ct)
	}
	return nil
}

// maxBody bounds a request body.
const maxBody = 1 << 20

// decode reads the JSON body into v, refusing unknown fields.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return badRequest("the request has no JSON body")
		}
		return badRequest("the request body is not the JSON expected: %v", err)
	}
	if dec.More() {
		return badRequest("the request body holds more than one JSON value")
	}
	return nil
}

// intParam reads a non-negative integer query parameter (def when absent).
func intParam(r *http.Request, name string, def, max int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, badRequest("%s=%q is not a non-negative integer", name, s)
	}
	if max > 0 && n > max {
		n = max
	}
	return n, nil
}
