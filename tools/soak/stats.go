package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"time"
)

// tally counts what the agents' calls got. A call that overlaps the kill window (from the
// SIGKILL until the restarted node answers /healthz) may fail: its errors are expected and
// counted apart. Every other call must do what it must.
type tally struct {
	mu        sync.Mutex
	lat       map[string][]time.Duration // by operation, calls that did what they must
	errs      map[string]int             // by kind: calls outside the kill window
	killErrs  map[string]int             // by kind: calls in the kill window
	example   map[string]string          // a full error message per kind
	receipts  []*answered                // every receipt an agent got with an answer
	turns     int                        // delegated turns answered with their receipt
	killAt    time.Time
	readyAt   time.Time // the restarted node answered /healthz
	restartAt time.Time
	firstTurn time.Time // the first turn answered that started after the restart
}

func newTally() *tally {
	return &tally{lat: map[string][]time.Duration{}, errs: map[string]int{}, killErrs: map[string]int{}, example: map[string]string{}}
}

// ids are what varies between two errors of one kind.
var ids = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[A-Za-z0-9_-]{24,}`)

// kind names an error for counting: what the connection did, or the error's words without ids.
func kind(op string, err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return op + ": connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return op + ": connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return op + ": connection closed (EOF)"
	case errors.Is(err, context.DeadlineExceeded):
		return op + ": no answer within a minute"
	}
	k := op + ": " + ids.ReplaceAllString(err.Error(), "…")
	if len(k) > 160 {
		k = k[:160] + "…"
	}
	return k
}

func (t *tally) record(op string, start, end time.Time, o outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o.err == nil {
		t.lat[op] = append(t.lat[op], end.Sub(start))
		if o.receipt != nil {
			t.turns++
			t.receipts = append(t.receipts, o.receipt)
			if !t.restartAt.IsZero() && start.After(t.restartAt) && t.firstTurn.IsZero() {
				t.firstTurn = end
			}
		}
		return
	}
	k := kind(op, o.err)
	if _, ok := t.example[k]; !ok {
		t.example[k] = o.err.Error()
	}
	if inWindow := !t.killAt.IsZero() && !end.Before(t.killAt) && (t.readyAt.IsZero() || !start.After(t.readyAt)); inWindow {
		t.killErrs[k]++
	} else {
		t.errs[k]++
	}
}

func (t *tally) mark(f func(t *tally)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// report prints the calls by operation, the turn rate and latencies, and the errors by kind.
func (t *tally) report(w io.Writer, took time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(w, "%-12s %8s %9s %9s\n", "calls", "ok", "p50", "p99")
	var turns []time.Duration
	for _, ow := range opWeights {
		d := slices.Clone(t.lat[ow.op])
		slices.Sort(d)
		fmt.Fprintf(w, "%-12s %8d %9s %9s\n", ow.op, len(d), ms(percentile(d, 0.5)), ms(percentile(d, 0.99)))
		if ow.op == opSend || ow.op == opStream {
			turns = append(turns, d...)
		}
	}
	slices.Sort(turns)
	fmt.Fprintf(w, "turns: %d answered with their receipt in %s: %.1f turns/s; send and stream p50 %s, p99 %s\n",
		t.turns, took.Round(time.Millisecond), float64(t.turns)/took.Seconds(), ms(percentile(turns, 0.5)), ms(percentile(turns, 0.99)))
	for _, c := range []struct {
		what     string
		m        map[string]int
		examples bool
	}{{"errors of valid calls", t.errs, true}, {"errors in the kill window (expected)", t.killErrs, false}} {
		fmt.Fprintf(w, "%s: %d\n", c.what, sum(c.m))
		for _, k := range slices.Sorted(maps.Keys(c.m)) {
			fmt.Fprintf(w, "  %6d  %s\n", c.m[k], k)
			if c.examples {
				fmt.Fprintf(w, "          e.g. %s\n", t.example[k])
			}
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
