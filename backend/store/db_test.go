package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"gorm.io/gorm"
)

func openTemp(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pact.sqlite")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func TestOpenAppliesPragmasAndSchema(t *testing.T) {
	db, path := openTemp(t)
	var mode string
	db.w.Raw("PRAGMA journal_mode").Scan(&mode)
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	var sync, fk, ver, temp int
	db.w.Raw("PRAGMA synchronous").Scan(&sync)
	db.w.Raw("PRAGMA foreign_keys").Scan(&fk)
	db.w.Raw("PRAGMA user_version").Scan(&ver)
	db.w.Raw("PRAGMA temp_store").Scan(&temp)
	if sync != 2 || fk != 1 || ver != len(migrations) || temp != 2 {
		t.Errorf("synchronous=%d foreign_keys=%d user_version=%d temp_store=%d", sync, fk, ver, temp)
	}
	// The read pool must refuse writes.
	if err := db.r.Exec("INSERT INTO meta(key, value) VALUES ('x', 'y')").Error; err == nil {
		t.Error("read pool accepted a write")
	}
	db.Close()
	// Reopening migrates nothing and keeps the data.
	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	db2.Close()
}

func TestWriteIsAtomic(t *testing.T) {
	db, _ := openTemp(t)
	boom := errors.New("boom")
	err := db.write(context.Background(), func(tx *gorm.DB) error {
		if err := tx.Exec("INSERT INTO meta(key, value) VALUES ('a', '1')").Error; err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	var n int64
	db.read(context.Background()).Raw("SELECT count(*) FROM meta").Scan(&n)
	if n != 0 {
		t.Fatalf("rolled back write left %d rows", n)
	}
}

func TestCorruptFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pact.sqlite")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		db.w.Exec("INSERT INTO meta(key, value) VALUES (?, hex(randomblob(500)))", i)
	}
	db.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Scribble over the middle pages, past the header.
	junk := make([]byte, 8192)
	for i := range junk {
		junk[i] = 0xA5
	}
	f.WriteAt(junk, 8192)
	f.Close()
	t.Run("T5 DB file corrupted", func(t *testing.T) {
		db, err := Open(path)
		if err == nil {
			db.Close()
			t.Fatal("opened a corrupted pact.sqlite")
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Logf("error (not ErrCorrupt, still refused): %v", err)
		}
	})
}

func TestGroupCommitIsolatesFailures(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = db.write(ctx, func(tx *gorm.DB) error {
				if err := tx.Exec("INSERT INTO meta(key, value) VALUES (?, 'v')", fmt.Sprint(i)).Error; err != nil {
					return err
				}
				if i%2 == 1 {
					return errors.New("odd writes fail")
				}
				return nil
			})
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if (i%2 == 1) != (err != nil) {
			t.Errorf("write %d: err = %v", i, err)
		}
	}
	db.Close()
	// Only the even writes are durable, and they survive a reopen.
	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	var n int64
	db2.read(ctx).Raw("SELECT count(*) FROM meta WHERE key != 'receipts.high_water'").Scan(&n)
	if n != 32 {
		t.Fatalf("%d rows committed, want 32", n)
	}
	if err := db2.write(ctx, func(tx *gorm.DB) error { panic("boom") }); err == nil {
		t.Fatal("a panicking write reported success")
	}
}
