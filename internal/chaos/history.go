package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Outcome is what a send attempt's caller learned.
type Outcome uint8

const (
	// Acked: the broker acknowledged the message (SEND_OK).
	Acked Outcome = iota + 1
	// Failed: the broker answered with an error code. The message may
	// still have been stored (a send refused at the lease re-check after
	// replication was stored), so this is not a definite failure.
	Failed
	// Unknown: no answer (timeout, connection lost, unreachable).
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "ack"
	case Failed:
		return "fail"
	case Unknown:
		return "unknown"
	}
	return "?"
}

// MsgKey names one logical message: the sequence number seq of sharding key
// key (keys are numbered across producers).
type MsgKey struct {
	Key int32
	Seq int32
}

// CopyID names one attempt to send a logical message: every attempt sends
// a body of its own, so each stored copy says which attempt wrote it.
type CopyID struct {
	MsgKey
	Attempt int32
}

// String is the identity carried at the front of a body.
func (c CopyID) String() string { return fmt.Sprintf("k%d.s%d.a%d", c.Key, c.Seq, c.Attempt) }

// bodySep ends the identity in a body; padding follows it.
const bodySep = '|'

// Body is the body of attempt c, padded to size bytes (at least the
// identity and the separator).
func Body(c CopyID, size int) []byte {
	b := append([]byte(c.String()), bodySep)
	for len(b) < size {
		b = append(b, 'x')
	}
	return b
}

// ParseBody returns the identity at the front of a body written by Body.
func ParseBody(b []byte) (CopyID, bool) {
	s := string(b)
	if i := strings.IndexByte(s, bodySep); i >= 0 {
		s = s[:i]
	} else {
		return CopyID{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return CopyID{}, false
	}
	var v [3]int64
	for i, p := range parts {
		if len(p) < 2 || p[0] != "ksa"[i] {
			return CopyID{}, false
		}
		n, err := strconv.ParseInt(p[1:], 10, 32)
		if err != nil || n < 0 {
			return CopyID{}, false
		}
		v[i] = n
	}
	return CopyID{MsgKey{int32(v[0]), int32(v[1])}, int32(v[2])}, true
}

// Attempt is one send attempt as the producer saw it. Times are offsets
// from the history's origin on the monotonic clock.
type Attempt struct {
	CopyID
	Producer int32
	Start    time.Duration
	End      time.Duration
	Outcome  Outcome
	// Code is the error code's name for Failed (or "TIMEOUT",
	// "UNREACHABLE", "CANCELED", "OTHER"), "" for Acked.
	Code string
	// Err is the error text (non-acked attempts).
	Err string
	// Broker is the acknowledging broker (Acked: from the offset message
	// id's store host), "" otherwise or when the host is unknown.
	Broker string
	// Offset is the acknowledged copy's CommitLog offset (Acked), -1
	// otherwise.
	Offset int64
	Queue  int32
}

// Event is a fault or step of a scenario, on the history's clock.
type Event struct {
	At   time.Duration
	Kind string // "kill", "sigstop", "sigcont", "isolate", "heal", "restart", "kill-controller", ...
	// Target is the broker ("b2") or controller ("n1") concerned.
	Target string
	// Cycle numbers the fault cycles from 0; a cycle's faults share it.
	Cycle int
	Note  string
}

// History records attempts and events. Safe for concurrent use.
type History struct {
	origin time.Time
	mu     sync.Mutex
	atts   []Attempt
	events []Event
}

// NewHistory starts a history now.
func NewHistory() *History { return &History{origin: time.Now()} }

// Now is the current offset on the history's clock.
func (h *History) Now() time.Duration { return time.Since(h.origin) }

// Origin is when the history started.
func (h *History) Origin() time.Time { return h.origin }

// Add records an attempt.
func (h *History) Add(a Attempt) {
	h.mu.Lock()
	h.atts = append(h.atts, a)
	h.mu.Unlock()
}

// Mark records an event at the current time and returns its time.
func (h *History) Mark(kind, target string, cycle int, note string) time.Duration {
	at := h.Now()
	h.mu.Lock()
	h.events = append(h.events, Event{At: at, Kind: kind, Target: target, Cycle: cycle, Note: note})
	h.mu.Unlock()
	return at
}

// Attempts returns a copy of the attempts recorded so far.
func (h *History) Attempts() []Attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Attempt(nil), h.atts...)
}

// Events returns a copy of the events recorded so far.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// AckedSince reports whether an attempt that ended after t was
// acknowledged by a broker other than not ("": any broker).
func (h *History) AckedSince(t time.Duration, not string) bool {
	return h.AckedSinceBy(t, func(a *Attempt) bool { return not == "" || a.Broker != not })
}

// AckedSinceBy reports whether an attempt that ended after t and
// satisfies ok was acknowledged.
func (h *History) AckedSinceBy(t time.Duration, ok func(*Attempt) bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.atts) - 1; i >= 0; i-- {
		a := &h.atts[i]
		if a.End <= t {
			// Attempts are appended at their end, so ends increase but
			// for the little time between an attempt's end and its Add.
			if t-a.End > time.Second {
				return false
			}
			continue
		}
		if a.Outcome == Acked && ok(a) {
			return true
		}
	}
	return false
}

// WriteFiles writes the attempts (attempts.csv) and events (events.csv)
// into dir, times in seconds from the origin.
func (h *History) WriteFiles(dir string) error {
	var b strings.Builder
	b.WriteString("producer,key,seq,attempt,start,end,outcome,code,broker,offset,queue,error\n")
	for _, a := range h.Attempts() {
		fmt.Fprintf(&b, "%d,%d,%d,%d,%.6f,%.6f,%s,%s,%s,%d,%d,%q\n", a.Producer, a.Key, a.Seq, a.Attempt,
			a.Start.Seconds(), a.End.Seconds(), a.Outcome, a.Code, a.Broker, a.Offset, a.Queue, a.Err)
	}
	if err := os.WriteFile(filepath.Join(dir, "attempts.csv"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	b.Reset()
	b.WriteString("at,kind,target,cycle,note\n")
	for _, e := range h.Events() {
		fmt.Fprintf(&b, "%.6f,%s,%s,%d,%q\n", e.At.Seconds(), e.Kind, e.Target, e.Cycle, e.Note)
	}
	return os.WriteFile(filepath.Join(dir, "events.csv"), []byte(b.String()), 0o644)
}
