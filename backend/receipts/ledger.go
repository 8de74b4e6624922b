package receipts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
	"github.com/aether/aether/backend/work"
	"github.com/golang-jwt/jwt/v5"
)

// ErrClosed: the ledger was closed; no more receipts are taken.
var ErrClosed = errors.New("receipts ledger closed")

// Ledger appends receipts to the node's chain. It builds and signs the
// receipts inside one write of the store's group commit (chain.go), so many
// concurrent appends share one fsync and the chain's order is decided by the
// committer alone (durable.go).
type Ledger struct {
	db     *store.DB
	chain  chain
	key    *keys.Key
	issuer atomic.Pointer[string] // the node's publicUrl, the receipts' iss
	now    func() time.Time
	mark   atomic.Pointer[marker] // receipts.head, once kept (KeepHead)

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup // appends taken before Close
}

// NewLedger makes a ledger over db signing with key; issuer is the node's
// publicUrl (the receipts' iss). now nil means time.Now. Close it before db.
func NewLedger(db *store.DB, key *keys.Key, issuer string, now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	l := &Ledger{db: db, key: key, now: now}
	l.chain = chain{db: db, signer: l} // every receipt is a leaf of the log, with its proof (log.go)
	l.SetIssuer(issuer)
	return l
}

// SetIssuer changes the iss of the receipts signed from now on (the node's publicUrl changed).
func (l *Ledger) SetIssuer(issuer string) { l.issuer.Store(&issuer) }

// Close stops taking appends and waits until every append already taken is
// committed (or failed).
func (l *Ledger) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.inflight.Wait()
	return nil
}

// enter counts an append in, unless the ledger is closed; done counts it out.
func (l *Ledger) enter() (done func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	l.inflight.Add(1)
	return l.inflight.Done, nil
}

// Start records t as running, before any of its work runs (T8: a turn that
// never reaches Append is found by Recover).
func (l *Ledger) Start(ctx context.Context, t Turn) error {
	if err := checkTurnStart(t); err != nil {
		return fmt.Errorf("start turn %s: %w", t.ID, err)
	}
	return l.db.StartTurn(ctx, t.record())
}

// record is t's row in the turns table, as Start writes it.
func (t Turn) record() store.Turn {
	return store.Turn{ID: t.ID, TaskID: t.TaskID, ContextID: t.ContextID, Brand: t.Brand,
		BrandScope: t.BrandScope, GrantID: t.GrantID, Agent: t.Agent,
		PolicyHash: t.PolicyHash, StartedAt: t.StartedAt}
}

// unstarted is what the receipts of turns record first: the turns never started (Unstarted).
func unstarted(turns []Turn) []store.Turn {
	var out []store.Turn
	for _, t := range turns {
		if t.Unstarted {
			out = append(out, t.record())
		}
	}
	return out
}

// Append signs and commits the receipt that ends turn t (started with Start,
// with the same identifying fields and StartedAt, or Unstarted) and returns it once it is
// durable (T8). Appending a turn that already has a receipt returns that
// receipt (T9). ctx is honoured only until the append joins a group commit:
// give it a context that outlives the client's connection, the receipt must
// be written anyway.
func (l *Ledger) Append(ctx context.Context, t Turn) (*Receipt, error) {
	if t.EndedAt.IsZero() {
		t.EndedAt = l.now()
	}
	if err := checkTurnEnd(t); err != nil {
		return nil, fmt.Errorf("receipt for turn %s: %w", t.ID, err)
	}
	recs, err := l.append(ctx, []Turn{t}, true)
	if errors.Is(err, store.ErrTurnNotRunning) || t.Unstarted && errors.Is(err, store.ErrTurnExists) {
		// T9: the turn already ended (or, never started, was recorded with its receipt), so
		// its receipt is committed; hand it back.
		if existing, _ := l.db.ReceiptsForTurns(ctx, []string{t.ID}); len(existing) == 1 {
			return l.withProof(ctx, existing[t.ID])
		}
	}
	if err != nil {
		return nil, fmt.Errorf("receipt for turn %s: %w", t.ID, err)
	}
	return recs[0], nil
}

// NewTask is a task created in a receipt's own commit (AppendCreatingTask): its owner, and
// Build, which makes its row (its JSON, a2a-go's Task as the wire has it, and its columns)
// from the receipt.
type NewTask struct {
	Owner string
	Build func(*Receipt) (TaskRow, error)
}

// TaskRow is the row of a task created in a receipt's commit.
type TaskRow = store.TaskRow

// AppendCreatingTask is Append for a turn whose task is stored only now, finished: the
// task whose row build makes from the receipt (the task that carries it) is created, owner's on
// brand, in the receipt's own commit, one commit fewer a turn (docs/wire.md, "Plain send").
// build runs inside that commit, once the receipt is signed and has its log proof: it must be
// quick and must not use the store. On an error nothing is written, and the caller may Append
// the receipt alone.
//
// It returns as soon as the receipt and the task are written in their commit, before it is
// durable, so that the caller can make its answer while the commit is made: nothing of the
// receipt or the task may leave the node before the Pending commit's Durable has returned nil
// (T8). Close waits for that commit.
func (l *Ledger) AppendCreatingTask(ctx context.Context, t Turn, brand domain.BrandID, owner string, build func(*Receipt) (TaskRow, error)) (*Receipt, *Pending, error) {
	if t.EndedAt.IsZero() {
		t.EndedAt = l.now()
	}
	if err := checkTurnEnd(t); err != nil {
		return nil, nil, fmt.Errorf("receipt for turn %s: %w", t.ID, err)
	}
	done, err := l.enter()
	if err != nil {
		return nil, nil, err
	}
	var recs []*Receipt
	commit, err := l.chain.appendAhead(ctx, unstarted([]Turn{t}), l.signer([]Turn{t}, &recs), brand, owner, func(proofs []*LogProof) (TaskRow, error) {
		prove(recs, proofs)
		return build(recs[0])
	})
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("receipt for turn %s: %w", t.ID, err)
	}
	rec := recs[0]
	pending := &Pending{commit: commit, mark: l.mark.Load(), head: headOf(rec)}
	go func() { // counted out once the commit is over, its failure noted on the turn
		if err := pending.Durable(); err != nil {
			l.unrecorded(t, err)
		}
		done()
	}()
	return rec, pending, nil
}

// append signs turns as the next receipts of the chain, in order, and commits
// them together: all or none. note: a turn's receipt that is not committed is noted on it
// (unrecorded).
func (l *Ledger) append(ctx context.Context, turns []Turn, note bool) ([]*Receipt, error) {
	done, err := l.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	var recs []*Receipt
	_, proofs, err := l.chain.appendDurable(ctx, unstarted(turns), l.signer(turns, &recs))
	if err == nil {
		prove(recs, proofs)
		err = l.mark.Load().hold(headOf(recs[len(recs)-1]))
	}
	if err != nil {
		if note {
			for _, t := range turns {
				l.unrecorded(t, err)
			}
		}
		return nil, err
	}
	return recs, nil
}

// prove gives each receipt just appended its place in the log (none without one).
func prove(recs []*Receipt, proofs []*LogProof) {
	for i, p := range proofs {
		recs[i].proof = p
	}
}

// signer signs turns with sign for the chain, and leaves their receipts in *recs.
func (l *Ledger) signer(turns []Turn, recs *[]*Receipt) signFunc {
	return func(tail store.Checkpoint, revoked func(domain.GrantID) (bool, error)) (rows []store.Receipt, err error) {
		rows, *recs, err = l.sign(turns, tail, revoked)
		return rows, err
	}
}

// unrecorded notes on turn t, still running, why its receipt was not committed (err), so that
// the failed receipt the next start gives it says so rather than that the node stopped
// (Recover). Not for a turn never started (its record went with its receipt), nor when err
// says the turn is not running as t describes it (its receipt may be stored), the node is
// stopping (it did stop), or the receipt was committed but not marked.
// Call it while the append is counted in (enter): Close waits for the note.
func (l *Ledger) unrecorded(t Turn, err error) {
	var turnErr *store.TurnError
	if t.Unstarted || errors.As(err, &turnErr) || errors.Is(err, ErrClosed) || errors.Is(err, store.ErrClosed) || errors.Is(err, ErrHeadMark) {
		return
	}
	why := ReasonUnrecorded + store.Why(err)
	if err := l.db.NoteUnrecorded(context.Background(), t.ID, why); err != nil {
		slog.Error("receipts: could not note why a turn's receipt was not committed; the next start will say the node stopped",
			"turn", t.ID, "why", why, "err", err)
	}
}

// Recover ends every turn still running — the node stopped in the middle of
// it, or could not commit its receipt — with a failed receipt (ReasonNodeStopped, or
// the reason noted on it, exit -1), so that after a
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
			GrantID: o.GrantID, Agent: o.Agent, PolicyHash: o.PolicyHash,
			Status: domain.TurnFailed, Reason: interrupted(o), ExitCode: -1,
			StartedAt: o.StartedAt, EndedAt: later(now, o.StartedAt)}
	}
	// One write: the chain takes them oldest first, and all or none.
	if _, err := l.append(ctx, turns, false); err != nil {
		return 0, fmt.Errorf("end %d interrupted turns: %w", len(turns), err)
	}
	slog.Warn("receipts: ended the turns left running when the node stopped (or whose receipt it could not commit)", "count", len(turns))
	return len(turns), nil
}

// interrupted is the reason of the failed receipt Recover gives turn o: why its receipt was
// not committed, when that was noted, else that the node stopped.
func interrupted(o store.Turn) string {
	if o.Reason != "" {
		return o.Reason
	}
	return ReasonNodeStopped
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
		return fmt.Errorf("receipt %d is missing: the receipt store was truncated, rolled back or lost its last writes", c.Seq)
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
		{"id", t.ID}, {"task id", t.TaskID}, {"context id", t.ContextID}, {"brand", string(t.Brand)},
		{"brand scope", t.BrandScope}, {"grant id", string(t.GrantID)}, {"agent issuer", t.Agent.Issuer},
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
	case domain.TurnCompleted, domain.TurnFailed, domain.TurnCanceled:
	default:
		return fmt.Errorf("status %q is not completed, failed or canceled", t.Status)
	}
	if t.EndedAt.Truncate(time.Millisecond).Before(t.StartedAt.Truncate(time.Millisecond)) {
		return errors.New("ends before it starts")
	}
	return nil
}

// sign builds and signs the receipts of turns in order, continuing the chain
// from tail. The chain calls it inside the write that commits them, and a turn
// whose grant is revoked by then says so (V2: it ran, or began, under a grant
// the owner has since withdrawn).
func (l *Ledger) sign(turns []Turn, tail store.Checkpoint, revoked func(grantID domain.GrantID) (bool, error)) ([]store.Receipt, []*Receipt, error) {
	rows := make([]store.Receipt, len(turns))
	recs := make([]*Receipt, len(turns))
	prev, seq := tail.Hash, tail.Seq
	if seq == 0 {
		prev = Genesis(l.key.ID())
	}
	now := l.now()
	for i, t := range turns {
		seq++
		rid, err := newID()
		if err != nil {
			return nil, nil, err
		}
		if !t.GrantRevokedDuringTurn {
			if t.GrantRevokedDuringTurn, err = revoked(t.GrantID); err != nil {
				return nil, nil, fmt.Errorf("the receipt of turn %s: %w", t.ID, err)
			}
		}
		started, ended := t.StartedAt.UTC().Truncate(time.Millisecond), t.EndedAt.UTC().Truncate(time.Millisecond)
		c := Claims{RID: rid, Seq: seq, Prev: prev, Turn: t.ID, Task: t.TaskID, Ctx: t.ContextID,
			Brand: string(t.Brand), Scope: t.BrandScope, PactScope: store.PactScope, Grant: string(t.GrantID), Agent: t.Agent,
			Req: t.RequestHash, Ans: t.AnswerHash, Policy: t.PolicyHash, Status: t.Status, Reason: t.Reason,
			Exit: t.ExitCode, Started: formatTime(started), Ended: formatTime(ended), Usage: t.Usage,
			Violation: t.Violation, GrantRevoked: t.GrantRevokedDuringTurn, Kid: l.key.ID(), V: Version, Work: t.Work}
		c.Issuer, c.ID = *l.issuer.Load(), rid
		c.IssuedAt = jwt.NewNumericDate(now)
		jws, err := l.signFitting(&c)
		if err != nil {
			return nil, nil, fmt.Errorf("sign the receipt of turn %s: %w", t.ID, err)
		}
		hash := HashBytes([]byte(jws))
		rows[i] = store.Receipt{Seq: seq, ID: rid, TurnID: t.ID, PrevHash: prev, Hash: hash, TaskID: t.TaskID,
			ContextID: t.ContextID, Brand: t.Brand, Scope: t.BrandScope, GrantID: t.GrantID,
			Agent: t.Agent, Status: t.Status, Reason: t.Reason,
			ExitCode: t.ExitCode, StartedAt: started, EndedAt: ended, JWS: jws}
		recs[i] = &Receipt{Seq: seq, ID: rid, Hash: hash, PrevHash: prev, JWS: jws, Claims: c}
		prev = hash
	}
	return rows, recs, nil
}

// signFitting signs c, its work cut to fewer items (work.Work.Keep: 16, 8, …, none, each list
// keeping its count and the digest of all) until the receipt is at most MaxReceipt
// bytes: the signed size is the bound, and a turn cannot lose its receipt, nor hide what it
// did, by making the receipt too big (docs/threats.md T15).
func (l *Ledger) signFitting(c *Claims) (string, error) {
	full := c.Work
	for keep := work.MaxEntries; ; keep /= 2 {
		jws, err := l.key.Sign(Typ, c)
		if err != nil || len(jws) <= MaxReceipt || full == nil || keep == 0 {
			return jws, err
		}
		c.Work = full.Keep(keep / 2)
	}
}

// newID is a receipt id: "r_" and 120 random bits in lowercase base32.
func newID() (string, error) {
	b := make([]byte, 15)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("receipt id: %w", err)
	}
	return "r_" + strings.ToLower(idEncoding.EncodeToString(b)), nil
}
