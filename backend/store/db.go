// Package store keeps everything the node must not lose in pact.sqlite: tasks,
// device flows, grants, turns and receipts. It is the only package that knows gorm.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"time"

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
}

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
	db := &DB{w: w, Now: time.Now}
	if err := db.check(); err != nil {
		wsql.Close()
		return nil, err
	}
	if err := db.migrate(); err != nil {
		wsql.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	r, err := gorm.Open(sqlite.Open(dsn(path, true)), cfg)
	if err != nil {
		wsql.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	rsql, _ := r.DB()
	rsql.SetMaxOpenConns(max(2, runtime.NumCPU()))
	db.r = r
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

// Close checkpoints the WAL and closes both pools.
func (db *DB) Close() error {
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

// write runs fn in one IMMEDIATE transaction on the writer. fn must use tx only,
// never db.w or db.r (the single writer connection is busy with tx).
func (db *DB) write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return db.w.WithContext(ctx).Transaction(fn)
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
