package receipts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
)

// Source yields stored receipts in seq order: store.DB.AllReceipts, or
// ReadJSONL over an export. A source may yield a *Problem as its error to
// report a receipt it found bad itself (an export line that lies about its JWS).
type Source = iter.Seq2[store.Receipt, error]

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Issuer, when set, is the node (publicUrl) every receipt must be issued by.
	Issuer string
	// Expect is a high-water mark kept outside the store (T4, T6): the receipt
	// at Expect.Seq must be there and, when Expect.Hash is set, have that hash.
	Expect *store.Checkpoint
}

// Problem is the first bad receipt Verify met, and why. Seq is 0 when the
// problem is not one receipt's (a broken export line, a removed high-water
// mark); ID is empty when the receipt is not there (a cut tail).
type Problem struct {
	Seq    int64
	ID     string
	Reason string
}

func (p *Problem) Error() string {
	if p.Seq == 0 {
		return p.Reason
	}
	if p.ID == "" {
		return fmt.Sprintf("receipt %d: %s", p.Seq, p.Reason)
	}
	return fmt.Sprintf("receipt %d (%s): %s", p.Seq, p.ID, p.Reason)
}

// Report is Verify's answer. Count, LastSeq and LastHash cover the receipts
// that checked out, up to the first problem.
type Report struct {
	Count    int
	LastSeq  int64
	LastHash string
	OK       bool
	Problem  *Problem
	// The receipts log, checked by VerifyDB once the chain verifies: its leaves, the
	// checkpoints the node signed (every one verified) and its origin.
	LogSize     int64
	Checkpoints int
	Origin      string
}

// verifyChunk is how many receipts one worker checks at a time: the unit that flows from the
// reader through the workers to the chain walk.
const verifyChunk = 256

// VerifyOne checks one receipt JWS on its own (the Verify button): alg EdDSA,
// typ, a kid in h (T7), the signature, that the claims are well formed, and that
// a retired key signed it before its rotation (T13). It does not place the
// receipt in a chain.
func VerifyOne(jws string, hist keys.History) (*Claims, error) {
	var c Claims
	if err := hist.Set.Verify(jws, Typ, &c); err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	hdr, err := jwsPart(jws, 0)
	if err != nil {
		return nil, err
	}
	var h struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(hdr, &h); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	switch {
	case c.Kid != h.Kid:
		return nil, fmt.Errorf("claim kid %q is not the signing key %q", c.Kid, h.Kid)
	case c.PactScope != store.PactScope:
		return nil, fmt.Errorf("pact_scope %q, want %q", c.PactScope, store.PactScope)
	case c.Seq < 1 || c.RID == "" || c.Turn == "":
		return nil, errors.New("no seq, rid or turn")
	}
	switch c.Status {
	case domain.TurnCompleted, domain.TurnFailed, domain.TurnCanceled:
	default:
		return nil, fmt.Errorf("status %q", c.Status)
	}
	if err := checkVersion(&c); err != nil {
		return nil, err
	}
	if _, err := parseTime(c.Started); err != nil {
		return nil, fmt.Errorf("started: %w", err)
	}
	if _, err := parseTime(c.Ended); err != nil {
		return nil, fmt.Errorf("ended: %w", err)
	}
	var iat time.Time
	if c.IssuedAt != nil {
		iat = c.IssuedAt.Time
	}
	if err := hist.CheckSigned(c.Kid, c.Seq, iat); err != nil {
		return nil, err
	}
	return &c, nil
}

// Verify walks src and checks every receipt: its signature against h (T1
// edited JWS, T7 foreign key, T13 a retired key used after its rotation), its hash, that the stored columns say what the
// signed claims say (T1 edited row), seq continuity (T3 gap, T2/T11 repeats)
// and the prev-hash chain (T2 swap, T3 deletion, T11 fork), and finally
// opts.Expect (T4, T6). It stops at the first bad receipt. The error is for a
// source that cannot be read; a bad chain is a Report with a Problem.
func Verify(ctx context.Context, src Source, h keys.History, opts VerifyOptions) (*Report, error) {
	var marks []mark
	if opts.Expect != nil {
		marks = append(marks, mark{Checkpoint: *opts.Expect, who: "the expected high-water mark"})
	}
	return verify(ctx, src, h, opts, marks)
}

// VerifyDB verifies the whole store: Verify over every receipt, and also the
// high-water mark the store keeps in meta (which catches a tail deleted
// without touching meta; see store.DB.ReceiptHighWater for its limits).
func VerifyDB(ctx context.Context, db *store.DB, h keys.History, opts VerifyOptions) (*Report, error) {
	// Read the mark first: receipts appended during the walk only move the tail past it.
	hw, ok, err := db.ReceiptHighWater(ctx)
	if err != nil {
		return nil, err
	}
	var marks []mark
	if opts.Expect != nil {
		marks = append(marks, mark{Checkpoint: *opts.Expect, who: "the expected high-water mark"})
	}
	if ok {
		marks = append(marks, mark{Checkpoint: hw, who: "the store's own high-water mark"})
	}
	rep, err := verify(ctx, db.AllReceipts(ctx), h, opts, marks)
	if err != nil || !rep.OK {
		return rep, err
	}
	p, err := verifyLog(ctx, db, h.Set, rep)
	if err != nil {
		return nil, err
	}
	if p != nil {
		rep.OK, rep.Problem = false, p
		return rep, nil
	}
	if ok || rep.Count == 0 {
		return rep, nil
	}
	if _, ok, err = db.ReceiptHighWater(ctx); err != nil || ok {
		return rep, err
	}
	rep.OK, rep.Problem = false, &Problem{Reason: "the store holds receipts but no high-water mark: its meta table was edited"}
	return rep, nil
}

type mark struct {
	store.Checkpoint
	who    string
	seenID string
	seen   string // hash of the receipt at Seq, once walked past
}

type verifier struct {
	keys  keys.History
	cps   *checkpoints // the log checkpoints export lines' proofs name
	opts  VerifyOptions
	marks []mark
	rep   Report
	// signed is the first seq each key signed in the chain walked so far: a retired key
	// signs nothing after a successor did (T13, also under a version 1 statement).
	signed map[string]int64
}

// batch is verifyChunk receipts in seq order on their way through verify: the reader fills
// rows, a worker checks each receipt on its own (alone), then the walk puts them in the chain
// in order. A batch that ends the source carries its Problem, or err when the source could not
// be read (then its rows are not walked).
type batch struct {
	rows    []store.Receipt
	claims  []*Claims
	reasons []string      // why each receipt is bad on its own, "" if it is not
	checked chan struct{} // closed once a worker has checked every row
	problem *Problem
	err     error
}

// verify reads src on one goroutine, checks each receipt on its own (signature, hash, columns,
// issuer) on every core, and walks the chain (seq, prev, marks) in seq order on this one, so
// the first problem reported is the same as a walk one receipt at a time would find.
func verify(ctx context.Context, src Source, h keys.History, opts VerifyOptions, marks []mark) (*Report, error) {
	v := &verifier{keys: h, cps: &checkpoints{set: h.Set}, opts: opts, marks: marks, signed: map[string]int64{}}
	workers := runtime.GOMAXPROCS(0)
	// Bounded: at most about 2×workers batches are read ahead of the walk.
	work, ordered := make(chan *batch, workers), make(chan *batch, workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop) // the walk is over: the reader and the workers give up
	for range workers {
		wg.Go(func() {
			for b := range work {
				v.checkAlone(b, stop)
			}
		})
	}
	wg.Go(func() {
		defer close(work)
		defer close(ordered)
		read(ctx, src, stop, work, ordered)
	})
	for b := range ordered {
		if b.err != nil {
			return nil, b.err
		}
		<-b.checked
		if !v.walk(b) {
			return v.report(), nil
		}
		if b.problem != nil {
			v.rep.Problem = b.problem
			return v.report(), nil
		}
	}
	for _, m := range v.marks {
		if m.seen == "" && m.Seq > 0 {
			v.rep.Problem = &Problem{Seq: m.Seq, Reason: fmt.Sprintf(
				"%s says receipt %d exists, but the chain ends at seq %d: its tail was cut, or the store was rolled back to an older copy",
				m.who, m.Seq, v.rep.LastSeq)}
			break
		}
	}
	return v.report(), nil
}

// read cuts src into batches and hands each to the workers and, in order, to the walk, until
// src ends, fails, ctx ends or stop closes.
func read(ctx context.Context, src Source, stop <-chan struct{}, work, ordered chan<- *batch) {
	send := func(b *batch) bool {
		for _, ch := range []chan<- *batch{ordered, work} {
			select {
			case ch <- b:
			case <-stop:
				return false
			}
		}
		return true
	}
	b := newBatch()
	for r, err := range src {
		if err != nil {
			if !errors.As(err, &b.problem) {
				b.rows, b.err = nil, fmt.Errorf("verify receipts: %w", err)
			}
			send(b)
			return
		}
		if err := ctx.Err(); err != nil {
			b.rows, b.err = nil, err
			send(b)
			return
		}
		b.rows = append(b.rows, r)
		if len(b.rows) == verifyChunk {
			if !send(b) {
				return
			}
			b = newBatch()
		}
	}
	send(b)
}

func newBatch() *batch {
	return &batch{rows: make([]store.Receipt, 0, verifyChunk), checked: make(chan struct{})}
}

// checkAlone checks every receipt of b on its own; once the walk is over it only lets go.
func (v *verifier) checkAlone(b *batch, stop <-chan struct{}) {
	defer close(b.checked)
	b.claims, b.reasons = make([]*Claims, len(b.rows)), make([]string, len(b.rows))
	for i, r := range b.rows {
		select {
		case <-stop:
			return
		default:
		}
		b.claims[i], b.reasons[i] = v.alone(r)
	}
}

func (v *verifier) report() *Report {
	v.rep.OK = v.rep.Problem == nil
	return &v.rep
}

// walk puts b's receipts in the chain in order. It reports whether every receipt was good.
func (v *verifier) walk(b *batch) bool {
	for i, r := range b.rows {
		reason := b.reasons[i]
		if reason == "" {
			reason = v.chained(r, b.claims[i])
		}
		if reason != "" {
			v.rep.Problem = &Problem{Seq: r.Seq, ID: r.ID, Reason: reason}
			return false
		}
		v.rep.Count++
		v.rep.LastSeq, v.rep.LastHash = r.Seq, r.Hash
	}
	return true
}

// alone returns r's claims, or why r is bad whatever its place in the chain: its signature,
// hash, columns or issuer.
func (v *verifier) alone(r store.Receipt) (*Claims, string) {
	c, err := VerifyOne(r.JWS, v.keys)
	if err != nil {
		return nil, "does not verify: " + err.Error()
	}
	if h := HashBytes([]byte(r.JWS)); h != r.Hash {
		return nil, fmt.Sprintf("stored hash %s is not the SHA-256 of its JWS (%s)", r.Hash, h)
	}
	if col, stored, signed := differ(r, c); col != "" {
		return nil, fmt.Sprintf("column %s is %q but the signed receipt says %q", col, stored, signed)
	}
	if v.opts.Issuer != "" && c.Issuer != v.opts.Issuer {
		return nil, fmt.Sprintf("issued by %q, not by this node (%q)", c.Issuer, v.opts.Issuer)
	}
	if r.Proof != "" {
		if why := v.cps.proven(r); why != "" {
			return nil, why
		}
	}
	return c, ""
}

// chained returns why r, good on its own, does not follow the receipts walked before it, or "".
func (v *verifier) chained(r store.Receipt, c *Claims) string {
	want := v.rep.LastSeq + 1
	switch {
	case r.Seq > want && r.Seq == want+1:
		return fmt.Sprintf("receipt %d is missing (seq jumps from %d to %d)", want, v.rep.LastSeq, r.Seq)
	case r.Seq > want:
		return fmt.Sprintf("receipts %d to %d are missing (seq jumps from %d to %d)", want, r.Seq-1, v.rep.LastSeq, r.Seq)
	case r.Seq < want:
		return fmt.Sprintf("seq %d comes after seq %d: receipts repeated, reordered or forked", r.Seq, v.rep.LastSeq)
	}
	prev := v.rep.LastHash
	if r.Seq == 1 {
		prev = Genesis(c.Kid)
	}
	if c.Prev != prev {
		if r.Seq == 1 {
			return "prev is not the genesis value of its key: the chain does not start here"
		}
		return fmt.Sprintf("prev does not match the hash of receipt %d: the chain is broken (a receipt changed, removed, reordered or forked)", v.rep.LastSeq)
	}
	if reason := v.keyOrder(c.Kid, r.Seq); reason != "" {
		return reason
	}
	for i := range v.marks {
		m := &v.marks[i]
		if m.Seq != r.Seq {
			continue
		}
		if m.Hash != "" && m.Hash != r.Hash {
			return fmt.Sprintf("hash %s differs from %s (%s): the chain was rewritten or rolled back", r.Hash, m.who, m.Hash)
		}
		m.seen, m.seenID = r.Hash, r.ID
	}
	return ""
}

// keyOrder returns why kid, signing receipt seq, comes too late in the chain: a key that
// followed it signed a receipt before (T13), or "".
func (v *verifier) keyOrder(kid string, seq int64) string {
	for _, next := range v.keys.Successors(kid) {
		if first, ok := v.signed[next]; ok {
			return fmt.Sprintf("signed by the retired key %s after its successor %s signed receipt %d: a retired key signs nothing after its rotation", kid, next, first)
		}
	}
	if _, ok := v.signed[kid]; !ok {
		v.signed[kid] = seq
	}
	return ""
}

// differ compares the stored columns with the signed claims and returns the
// first column that disagrees.
func differ(r store.Receipt, c *Claims) (col, stored, signed string) {
	started, _ := parseTime(c.Started)
	ended, _ := parseTime(c.Ended)
	for _, f := range []struct{ col, stored, signed string }{
		{"seq", strconv.FormatInt(r.Seq, 10), strconv.FormatInt(c.Seq, 10)},
		{"id", r.ID, c.RID},
		{"turn_id", r.TurnID, c.Turn},
		{"prev_hash", r.PrevHash, c.Prev},
		{"task_id", r.TaskID, c.Task},
		{"context_id", r.ContextID, c.Ctx},
		{"brand", string(r.Brand), c.Brand},
		{"scope", r.Scope, c.Scope},
		{"grant_id", string(r.GrantID), c.Grant},
		{"agent_iss", r.Agent.Issuer, c.Agent.Issuer},
		{"agent_sub", r.Agent.Subject, c.Agent.Subject},
		{"status", string(r.Status), string(c.Status)},
		{"reason", r.Reason, c.Reason},
		{"exit_code", strconv.Itoa(r.ExitCode), strconv.Itoa(c.Exit)},
		{"started_at", formatTime(r.StartedAt), formatTime(started)},
		{"ended_at", formatTime(r.EndedAt), formatTime(ended)},
	} {
		if f.stored != f.signed {
			return f.col, f.stored, f.signed
		}
	}
	return "", "", ""
}

// checkVersion checks c against the format its v names: version 1 has no work; version 2's
// work, when there, is bounded and escaped as the node writes it (docs/wire.md, "What the turn
// did"). Any other version is refused rather than half read.
func checkVersion(c *Claims) error {
	switch c.V {
	case 0:
		if c.Work != nil {
			return errors.New("work in a version 1 receipt (no v)")
		}
	case Version:
		if c.Work != nil {
			if err := c.Work.Check(); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("receipt format version %d: this verifier knows 1 and %d", c.V, Version)
	}
	return nil
}
