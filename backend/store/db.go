// Package store keeps everything the node must not lose in pact.sqlite: tasks,
// device flows, grants, turns and receipts. It is the only package that knows gorm.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// DB is pact.sqlite: one writer connection (SQLite allows one writer; a pool of
// writers only queues on the lock) and a pool of read-only connections (WAL lets
// readers run beside the writer).
type DB struct {
	w   *gorm.DB
	r   *gorm.DB
	Now func() time.Time

	// Group commit: concurrent writes wait in queue and one committer runs
	// them together in one transaction, each inside its own savepoint, so one
	// fsync serves many callers (Commit). Nobody is answered before the commit (a
	// caller answered ahead learns sooner that its write ran, to make its answer
	// meanwhile, and shows it only once the commit is durable: CommitAhead).
	mu         sync.Mutex
	queue      []*writeReq
	wake       chan struct{}
	stopped    chan struct{}
	closed     bool
	uses       map[domain.GrantID]grantUse // counted by RecordUseSoon since the last write of them
	usesQueued bool                        // that write is in queue
	grants     grantMemory                 // what GrantByID has read since the last write that may change grants

	// kept is what writes keep for the writes after them (Tx.Keep), dropped when a
	// transaction fails; txn numbers the transactions (Tx.N). Only the committer touches them.
	kept map[any]any
	txn  uint64
	// grantWrites is temp.grant_writes as the last transaction left it (countGrantWrites).
	// Only the committer touches it.
	grantWrites int64
}

type writeReq struct {
	fn   func(tx *Tx) error
	err  error
	done chan struct{}
	// ran, for a write answered ahead of its commit (CommitAhead), is closed once fn has run in the transaction, before its commit;
	// ranErr is what fn returned. The committer alone sets them (ranDone).
	ran    chan struct{}
	ranErr error
	told   bool // ran is closed
}

// ranDone tells a caller answered ahead of the commit, once, that fn has run (err: what it returned, or why
// it never ran).
func (req *writeReq) ranDone(err error) {
	if req.ran == nil || req.told {
		return
	}
	req.told, req.ranErr = true, err
	close(req.ran)
}

// maxBatch bounds one group commit.
const maxBatch = 128

// ErrCorrupt means the file failed PRAGMA quick_check: the node must not serve turns on it.
var ErrCorrupt = errors.New("pact.sqlite failed its integrity check")

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(5000)", "foreign_keys(1)", "synchronous(FULL)"} {
		q.Add("_pragma", p)
	}
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		// BEGIN IMMEDIATE: a write transaction takes the lock at its start, so two
		// writers never deadlock upgrading from a read lock. (The driver ignores
		// _txlock when _time_format is set, so times are stored as integers.)
		q.Set("_txlock", "immediate")
		// The group commit's savepoints journal each page they touch: keep that
		// sub-journal in memory, not spilled to a temporary file past 64 KiB.
		// Durability is the WAL's and does not change.
		q.Add("_pragma", "temp_store(MEMORY)")
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating if needed) pact.sqlite at path, checks its integrity and
// applies pending migrations.
func Open(path string) (*DB, error) {
	cfg := &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true, PrepareStmt: false}
	w, err := gorm.Open(sqlite.Open(dsn(path, false)), cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	wsql, err := w.DB()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	wsql.SetMaxOpenConns(1)
	wsql.SetConnMaxIdleTime(0)
	db := &DB{w: w, Now: time.Now, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	if err := db.check(); err != nil {
		wsql.Close()
		return nil, err
	}
	if err := db.migrate(); err != nil {
		wsql.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	if err := db.countGrantWrites(); err != nil {
		wsql.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r, err := gorm.Open(sqlite.Open(dsn(path, true)), cfg)
	if err != nil {
		wsql.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	rsql, _ := r.DB()
	rsql.SetMaxOpenConns(max(2, runtime.NumCPU()))
	db.r = r
	go db.commitLoop()
	return db, nil
}

func (db *DB) check() error {
	var res []string
	if err := db.w.Raw("PRAGMA quick_check").Scan(&res).Error; err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(res) != 1 || res[0] != "ok" {
		return fmt.Errorf("%w: %v", ErrCorrupt, res)
	}
	return nil
}

// Close finishes queued writes, checkpoints the WAL and closes both pools.
func (db *DB) Close() error {
	db.mu.Lock()
	if !db.closed {
		db.queueUses()
		db.closed = true
		close(db.wake)
	}
	db.mu.Unlock()
	<-db.stopped
	var errs []error
	if db.r != nil {
		if s, err := db.r.DB(); err == nil {
			errs = append(errs, s.Close())
		}
	}
	db.w.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	if s, err := db.w.DB(); err == nil {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// ErrClosed is returned for writes after Close.
var ErrClosed = errors.New("pact.sqlite is closed")

// Commit runs fn in the group commit and returns once its transaction is durable (nil), or
// why not: fn runs atomically inside an IMMEDIATE transaction on the writer, shared with the
// other writes queued at the same moment, each in its own savepoint (an error rolls back that
// write alone, and is returned). fn must use tx only, never the DB's own methods (it would
// wait on itself), must not keep tx, and must be quick: the writes behind it wait. Once queued, the write is committed or refused, never abandoned.
// What the grants GrantByID remembers is forgotten by what the write writes, not by how it
// was asked for (grantMemory).
func (db *DB) Commit(ctx context.Context, fn func(tx *Tx) error) error {
	p, err := db.submit(ctx, false, fn)
	if err != nil {
		return err
	}
	return p.Durable()
}

// CommitAhead is Commit answered ahead of the commit: it returns once fn has run in the
// transaction, for a caller that makes its answer meanwhile. What fn wrote is not shown to
// readers before the commit, and the caller must not show it to anyone either until
// Pending.Durable returns nil. An error from fn itself comes back at once, with nothing
// written.
func (db *DB) CommitAhead(ctx context.Context, fn func(tx *Tx) error) (*Pending, error) {
	return db.submit(ctx, true, fn)
}

// submit queues fn (Commit, CommitAhead).
func (db *DB) submit(ctx context.Context, ahead bool, fn func(tx *Tx) error) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req := &writeReq{fn: fn}
	if ahead {
		req.ran = make(chan struct{})
	}
	if err := db.push(req); err != nil {
		return nil, err
	}
	if ahead {
		if <-req.ran; req.ranErr != nil {
			return nil, req.ranErr
		}
	}
	return &Pending{req: req}, nil
}

// write is Commit for the store's own writes, on gorm.
func (db *DB) write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return db.Commit(ctx, func(tx *Tx) error { return fn(tx.tx) })
}

// Pending is a write queued in the group commit (CommitAhead).
type Pending struct{ req *writeReq }

// Durable returns once the write's commit is durable (nil), or why it is not; any number
// of goroutines may wait on it, each on the commit itself.
func (p *Pending) Durable() error {
	<-p.req.done
	return p.req.err
}

// push queues req.
func (db *DB) push(req *writeReq) error {
	req.done = make(chan struct{})
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return ErrClosed
	}
	db.queue = append(db.queue, req)
	db.signal()
	return nil
}

// signal wakes the committer; db.mu must be held (Close cannot close wake in between).
func (db *DB) signal() {
	select {
	case db.wake <- struct{}{}:
	default:
	}
}

// Flush returns once every write queued before it, and every use counted, is committed.
func (db *DB) Flush(ctx context.Context) error {
	db.mu.Lock()
	db.queueUses()
	db.mu.Unlock()
	return db.write(ctx, func(*gorm.DB) error { return nil })
}

func (db *DB) commitLoop() {
	defer close(db.stopped)
	for {
		db.mu.Lock()
		batch := db.queue
		if len(batch) > maxBatch {
			batch = batch[:maxBatch]
		}
		db.queue = db.queue[len(batch):]
		closed := db.closed
		db.mu.Unlock()
		if len(batch) == 0 {
			if closed {
				return
			}
			if _, ok := <-db.wake; !ok {
				continue // closed: drain what is left, then stop
			}
			continue
		}
		db.commit(batch)
	}
}

func (db *DB) commit(batch []*writeReq) {
	db.txn++
	grantsWritten := true
	var count int64
	err := db.transaction(func(gtx *gorm.DB) error {
		err := runBatch(&Tx{tx: gtx, db: db}, batch)
		var cerr error
		count, cerr = grantWrites(gtx)
		// Against the count the last transaction left: a write on this connection between
		// two transactions counts too, and forgets.
		grantsWritten = cerr != nil || count != db.grantWrites
		return err
	})
	if err != nil {
		db.kept = nil // what they keep may describe rows the file does not hold
	} else {
		db.grantWrites = count
	}
	if err != nil || grantsWritten {
		db.grants.forget() // before anyone hears back: the next GrantByID reads the file
	}
	release(batch, err)
}

// transaction runs fn in one IMMEDIATE transaction on the writer's connection, begun and
// ended by statements of its own: database/sql's Tx watches its context with a goroutine, and
// with another for every query in it, and waking each costs the committer more than the query.
func (db *DB) transaction(fn func(tx *gorm.DB) error) error {
	ctx := context.Background()
	pool, err := db.w.DB()
	if err != nil {
		return err
	}
	conn, err := pool.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	tx := db.w.Session(&gorm.Session{NewDB: true, Context: ctx})
	tx.Statement.ConnPool = conn
	if err = fn(tx); err == nil {
		_, err = conn.ExecContext(ctx, "COMMIT")
	}
	if err != nil {
		// Also after a failed COMMIT: SQLite keeps the transaction open when it was busy.
		conn.ExecContext(ctx, "ROLLBACK")
	}
	return err
}

// runBatch runs the writes of batch in tx, each in a savepoint of its own (one alone needs
// none).
func runBatch(tx *Tx, batch []*writeReq) error {
	if len(batch) == 1 {
		batch[0].err = run(tx, batch[0].fn)
		batch[0].ranDone(batch[0].err)
		return batch[0].err
	}
	for i, req := range batch {
		sp := "w" + strconv.Itoa(i)
		if _, err := exec(tx.tx, "SAVEPOINT "+sp); err != nil {
			return err
		}
		if req.err = run(tx, req.fn); req.err != nil {
			if _, err := exec(tx.tx, "ROLLBACK TO "+sp); err != nil {
				return err
			}
		}
		if _, err := exec(tx.tx, "RELEASE "+sp); err != nil {
			return err
		}
		req.ranDone(req.err)
	}
	return nil
}

// release answers everyone of a batch: err is why its commit failed (nil: it is durable).
func release(batch []*writeReq, err error) {
	for _, req := range batch {
		if err != nil && req.err == nil {
			req.err = fmt.Errorf("commit: %w", err)
		}
		req.ranDone(req.err) // the transaction failed before it ran fn
		close(req.done)
	}
}

// run calls fn, turning a panic into that write's error.
func run(tx *Tx, fn func(tx *Tx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("write panicked: %v", r)
		}
	}()
	return fn(tx)
}

// Tx is one write's handle on a group commit's transaction (Commit): the row methods a write
// uses, and what a caller keeps from one write to the next (Keep). Valid only while the
// write's function runs.
type Tx struct {
	tx *gorm.DB
	db *DB
}

// N numbers the transactions: the writes of one transaction see the same number, a later
// transaction a greater one.
func (t *Tx) N() uint64 { return t.db.txn }

// Kept is what was kept under key (Keep) by a write before this one, of this transaction or
// of one committed since (nil: nothing).
func (t *Tx) Kept(key any) any { return t.db.kept[key] }

// Keep keeps v under key for the writes after this one. A transaction that fails drops
// everything kept, so v may describe what this transaction wrote; a write rolled back to its
// savepoint does not drop it: keep only what holds whether this write succeeds or not, or keep
// it as the write's last step.
func (t *Tx) Keep(key, v any) {
	if t.db.kept == nil {
		t.db.kept = map[any]any{}
	}
	t.db.kept[key] = v
}

// exec and queryRow run one statement straight on tx's connection. A turn's own statements
// (its record, its receipt, its task, the chain's tail and mark, the log) and the group commit's
// savepoints use them: there gorm's statement machinery, building the statement and
// scanning through reflection, costs more than the statements themselves.
func exec(tx *gorm.DB, q string, args ...any) (rows int64, err error) {
	res, err := tx.Statement.ConnPool.ExecContext(tx.Statement.Context, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func queryRow(tx *gorm.DB, q string, args ...any) *sql.Row {
	return tx.Statement.ConnPool.QueryRowContext(tx.Statement.Context, q, args...)
}

// read gives a read-only session bound to ctx.
func (db *DB) read(ctx context.Context) *gorm.DB { return db.r.WithContext(ctx) }

// ms stores times as Unix milliseconds (UTC, sortable, no driver time formats).
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMS is the inverse of ms.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// msPtr and fromMSPtr handle optional times (NULL when absent).
func msPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := ms(*t)
	return &v
}

func fromMSPtr(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := fromMS(*v)
	return &t
}
