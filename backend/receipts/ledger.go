package receipts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
	"github.com/golang-jwt/jwt/v5"
)

// ErrClosed: the ledger was closed; no more receipts are taken.
var ErrClosed = errors.New("receipts ledger closed")

// maxBatch bounds one group commit.
const maxBatch = 256

// Ledger appends receipts to the node's chain. Concurrent Appends are group
// committed: one goroutine takes every waiting append (up to maxBatch), signs
// them in chain order, commits them in one transaction (synchronous=FULL, one
// fsync) and only then answers each caller.
type Ledger struct {
	db     *store.DB
	key    *keys.Key
	issuer string
	now    func() time.Time

	mu      sync.Mutex
	pending []*request
	closed  bool
	wake    chan struct{}
	done    chan struct{}

	head *store.Checkpoint // the committer's view of the tail; nil: read it again
}

type request struct {
	ctx  context.Context
	turn Turn
	out  chan outcome
}

type outcome struct {
	r   *Receipt
	err error
}

// NewLedger starts a ledger over db signing with key; issuer is the node's
// publicUrl (the receipts' iss). now nil means time.Now. Close it when done.
func NewLedger(db *store.DB, key *keys.Key, issuer string, now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	l := &Ledger{db: db, key: key, issuer: issuer, now: now, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go l.run()
	return l
}

// Close stops taking appends, waits until every append already taken is
// committed (or failed), and stops the committer.
func (l *Ledger) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.signal()
	<-l.done
	return nil
}

func (l *Ledger) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Start records t as running, before any of its work runs (T8: a turn that
// never reaches Append is found by Recover).
func (l *Ledger) Start(ctx context.Context, t Turn) error {
	if err := checkTurnStart(t); err != nil {
		return fmt.Errorf("start turn %s: %w", t.ID, err)
	}
	return l.db.StartTurn(ctx, store.Turn{ID: t.ID, TaskID: t.TaskID, ContextID: t.ContextID, Brand: t.Brand,
		BrandScope: t.BrandScope, GrantID: t.GrantID, AgentIss: t.Agent.Issuer, AgentSub: t.Agent.Subject,
		PolicyHash: t.PolicyHash, StartedAt: t.StartedAt})
}

// Append signs and commits the receipt that ends turn t (started with Start,
// with the same identifying fields and StartedAt) and returns it once it is
// durable. Appending a turn that already has a receipt returns that receipt
// (T9). ctx is honoured only until the append joins a batch: give it a context
// that outlives the client's connection, the receipt must be written anyway.
func (l *Ledger) Append(ctx context.Context, t Turn) (*Receipt, error) {
	if t.EndedAt.IsZero() {
		t.EndedAt = l.now()
	}
	if err := checkTurnEnd(t); err != nil {
		return nil, fmt.Errorf("receipt for turn %s: %w", t.ID, err)
	}
	reqs, err := l.enqueue(ctx, []Turn{t})
	if err != nil {
		return nil, err
	}
	o := <-reqs[0].out
	return o.r, o.err
}

// Recover ends every turn still running — the node stopped in the middle of
// it — with a failed receipt (ReasonNodeStopped, exit -1), so that after a
// crash no turn stays running and the chain stays whole (T8). Call it at
// start-up before serving turns. It returns how many turns it ended.
func (l *Ledger) Recover(ctx context.Context) (int, error) {
	open, err := l.db.OpenTurns(ctx)
	if err != nil || len(open) == 0 {
		return 0, err
	}
	now := l.now()
	turns := make([]Turn, len(open))
	for i, o := range open {
		turns[i] = Turn{ID: o.ID, TaskID: o.TaskID, ContextID: o.ContextID, Brand: o.Brand, BrandScope: o.BrandScope,
			GrantID: o.GrantID, Agent: Agent{Issuer: o.AgentIss, Subject: o.AgentSub}, PolicyHash: o.PolicyHash,
			Status: store.TurnFailed, Reason: ReasonNodeStopped, ExitCode: -1,
			StartedAt: o.StartedAt, EndedAt: later(now, o.StartedAt)}
	}
	reqs, err := l.enqueue(ctx, turns)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, r := range reqs {
		if o := <-r.out; o.err != nil {
			errs = append(errs, o.err)
		} else {
			n++
		}
	}
	slog.Warn("receipts: ended turns the node was running when it stopped", "count", n, "failed", len(errs))
	return n, errors.Join(errs...)
}

func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// Head is the chain's current tail (seq 0 before the first receipt). Keeping
// it somewhere outside pact.sqlite gives a high-water mark that detects a
// truncated or rolled-back store later (T4, T6).
func (l *Ledger) Head(ctx context.Context) (store.Checkpoint, error) { return l.db.ReceiptHead(ctx) }

// Confirm checks a high-water mark kept outside the store against it cheaply:
// the receipt at c.Seq must exist and, when c.Hash is set, have that hash.
func (l *Ledger) Confirm(ctx context.Context, c store.Checkpoint) error {
	r, err := l.db.ReceiptAt(ctx, c.Seq)
	if errors.Is(err, store.ErrReceiptNotFound) {
		return fmt.Errorf("receipt %d is missing: the receipt store was truncated or rolled back", c.Seq)
	}
	if err != nil {
		return err
	}
	if c.Hash != "" && r.Hash != c.Hash {
		return fmt.Errorf("receipt %d has hash %s, expected %s: the receipt store was rewritten or rolled back", c.Seq, r.Hash, c.Hash)
	}
	return nil
}

// List returns a page of receipts for the receipts page (newest first unless
// f.Oldest) and the next page's cursor (0: last page).
func (l *Ledger) List(ctx context.Context, f store.ReceiptFilter) ([]Receipt, int64, error) {
	rows, next, err := l.db.ListReceipts(ctx, f)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Receipt, 0, len(rows))
	for _, row := range rows {
		r, err := fromRow(row)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, *r)
	}
	return out, next, nil
}

// Get reads one receipt by id (store.ErrReceiptNotFound when absent). Its
// claims are decoded, not verified: VerifyOne does that.
func (l *Ledger) Get(ctx context.Context, id string) (*Receipt, error) {
	row, err := l.db.GetReceipt(ctx, id)
	if err != nil {
		return nil, err
	}
	return fromRow(*row)
}

// Source is every receipt in chain order (empty filter), or the receipts
// matching f oldest first: what an export streams.
func (l *Ledger) Source(ctx context.Context, f store.ReceiptFilter) Source {
	if f.Agent == "" && f.Brand == "" && f.Status == "" && f.From.IsZero() && f.To.IsZero() {
		return l.db.AllReceipts(ctx)
	}
	return l.db.ReceiptsMatching(ctx, f)
}

func checkTurnStart(t Turn) error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"id", t.ID}, {"task id", t.TaskID}, {"context id", t.ContextID}, {"brand", t.Brand},
		{"brand scope", t.BrandScope}, {"grant id", t.GrantID}, {"agent issuer", t.Agent.Issuer},
		{"agent subject", t.Agent.Subject},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if t.StartedAt.IsZero() {
		missing = append(missing, "start time")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return nil
}

func checkTurnEnd(t Turn) error {
	if err := checkTurnStart(t); err != nil {
		return err
	}
	switch t.Status {
	case store.TurnCompleted, store.TurnFailed, store.TurnCanceled:
	default:
		return fmt.Errorf("status %q is not completed, failed or canceled", t.Status)
	}
	if t.EndedAt.Truncate(time.Millisecond).Before(t.StartedAt.Truncate(time.Millisecond)) {
		return errors.New("ends before it starts")
	}
	return nil
}

func (l *Ledger) enqueue(ctx context.Context, turns []Turn) ([]*request, error) {
	reqs := make([]*request, len(turns))
	for i, t := range turns {
		reqs[i] = &request{ctx: ctx, turn: t, out: make(chan outcome, 1)}
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	l.pending = append(l.pending, reqs...)
	l.mu.Unlock()
	l.signal()
	return reqs, nil
}

// take removes up to maxBatch waiting appends.
func (l *Ledger) take() (batch []*request, closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(len(l.pending), maxBatch)
	batch = append(batch, l.pending[:n]...)
	l.pending = append(l.pending[:0], l.pending[n:]...)
	return batch, l.closed
}

// run is the committer: one batch at a time, so the chain is signed in the
// order it is stored.
func (l *Ledger) run() {
	defer close(l.done)
	for range l.wake {
		for {
			batch, closed := l.take()
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			l.commit(batch)
		}
	}
}

// maxStale bounds how often one batch is re-signed because the stored chain
// moved under it (only another writer of the same file can cause that).
const maxStale = 2

func (l *Ledger) commit(batch []*request) {
	ctx := context.Background()
	// One entry per turn: a retry racing its original gets the same receipt.
	byTurn := map[string][]*request{}
	var order []string
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.out <- outcome{err: err}
			continue
		}
		if _, ok := byTurn[r.turn.ID]; !ok {
			order = append(order, r.turn.ID)
		}
		byTurn[r.turn.ID] = append(byTurn[r.turn.ID], r)
	}
	reply := func(id string, rec *Receipt, err error) {
		for _, r := range byTurn[id] {
			if rec != nil {
				cp := *rec
				r.out <- outcome{r: &cp}
			} else {
				r.out <- outcome{err: err}
			}
		}
		delete(byTurn, id)
	}
	failAll := func(err error) {
		for _, id := range order {
			reply(id, nil, err)
		}
	}
	stale := 0
	for len(order) > 0 {
		if l.head == nil {
			h, err := l.db.ReceiptHead(ctx)
			if err != nil {
				failAll(err)
				return
			}
			l.head = &h
		}
		// T9: a turn that already has its receipt gets that one back.
		existing, err := l.db.ReceiptsForTurns(ctx, order)
		if err != nil {
			failAll(err)
			return
		}
		fresh := order[:0:0]
		for _, id := range order {
			if row, ok := existing[id]; ok {
				rec, err := fromRow(row)
				reply(id, rec, err)
			} else {
				fresh = append(fresh, id)
			}
		}
		order = fresh
		if len(order) == 0 {
			return
		}
		rows, recs, err := l.sign(order, byTurn, *l.head)
		if err != nil {
			failAll(err)
			return
		}
		err = l.db.AppendReceipts(ctx, rows)
		var te *store.TurnError
		switch {
		case err == nil:
			last := rows[len(rows)-1]
			l.head = &store.Checkpoint{Seq: last.Seq, Hash: last.Hash}
			for i, id := range order {
				reply(id, recs[i], nil)
			}
			return
		case errors.As(err, &te):
			// Only that turn is wrong: answer it, re-sign the rest.
			reply(te.TurnID, nil, fmt.Errorf("receipt for turn %s: %w", te.TurnID, te.Err))
			order = remove(order, te.TurnID)
		case (errors.Is(err, store.ErrChainHead) || errors.Is(err, store.ErrReceiptConflict)) && stale < maxStale:
			stale++
			l.head = nil
		default:
			l.head = nil
			failAll(err)
			return
		}
	}
}

func remove(ids []string, id string) []string {
	out := ids[:0:0]
	for _, v := range ids {
		if v != id {
			out = append(out, v)
		}
	}
	return out
}

// sign builds and signs the receipts of turns in order, continuing from head.
func (l *Ledger) sign(order []string, byTurn map[string][]*request, head store.Checkpoint) ([]store.Receipt, []*Receipt, error) {
	rows := make([]store.Receipt, len(order))
	recs := make([]*Receipt, len(order))
	prev, seq := head.Hash, head.Seq
	if seq == 0 {
		prev = Genesis(l.key.ID())
	}
	now := l.now()
	for i, id := range order {
		t := byTurn[id][0].turn
		seq++
		rid, err := newID()
		if err != nil {
			return nil, nil, err
		}
		started, ended := t.StartedAt.UTC().Truncate(time.Millisecond), t.EndedAt.UTC().Truncate(time.Millisecond)
		c := Claims{RID: rid, Seq: seq, Prev: prev, Turn: t.ID, Task: t.TaskID, Ctx: t.ContextID,
			Brand: t.Brand, Scope: t.BrandScope, PactScope: store.PactScope, Grant: t.GrantID, Agent: t.Agent,
			Req: t.RequestHash, Ans: t.AnswerHash, Policy: t.PolicyHash, Status: t.Status, Reason: t.Reason,
			Exit: t.ExitCode, Started: formatTime(started), Ended: formatTime(ended), Usage: t.Usage,
			Violation: t.Violation, GrantRevoked: t.GrantRevokedDuringTurn, Kid: l.key.ID()}
		c.Issuer, c.ID = l.issuer, rid
		c.IssuedAt = jwt.NewNumericDate(now)
		jws, err := l.key.Sign(Typ, c)
		if err != nil {
			return nil, nil, fmt.Errorf("receipt for turn %s: %w", t.ID, err)
		}
		hash := HashBytes([]byte(jws))
		rows[i] = store.Receipt{Seq: seq, ID: rid, TurnID: t.ID, PrevHash: prev, Hash: hash, TaskID: t.TaskID,
			ContextID: t.ContextID, Brand: t.Brand, Scope: t.BrandScope, GrantID: t.GrantID,
			AgentIss: t.Agent.Issuer, AgentSub: t.Agent.Subject, Status: t.Status, Reason: t.Reason,
			ExitCode: t.ExitCode, StartedAt: started, EndedAt: ended, JWS: jws}
		recs[i] = &Receipt{Seq: seq, ID: rid, Hash: hash, PrevHash: prev, JWS: jws, Claims: c}
		prev = hash
	}
	return rows, recs, nil
}

// newID is a receipt id: "r_" and 120 random bits in lowercase base32.
func newID() (string, error) {
	b := make([]byte, 15)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("receipt id: %w", err)
	}
	return "r_" + strings.ToLower(idEncoding.EncodeToString(b)), nil
}
