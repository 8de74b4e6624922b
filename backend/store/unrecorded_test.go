package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestNoteUnrecorded fills a real pact.sqlite up to its size limit (PRAGMA max_page_count on
// the writer, as a disk with no room left): a turn's receipt no longer fits, and why is kept
// on the turn, in the row it already has, for the receipt the next start gives it.
func TestNoteUnrecorded(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	tr := rcStarted(t, db, 1)[0]
	var pages int
	if err := db.w.Raw("PRAGMA page_count").Scan(&pages).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.w.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)).Error; err != nil {
		t.Fatal(err)
	}
	r := rcReceipt(tr, 1, rcPrev(1))
	r.JWS = strings.Repeat("j", 64<<10) // a receipt that needs pages the file may not take
	err := appendRows(ctx, db, []Receipt{r})
	if err == nil {
		t.Fatal("a receipt was committed past the file's size limit")
	}
	why := Why(err)
	if why != "the disk was full (SQLITE_FULL)" {
		t.Fatalf("Why(%v) = %q", err, why)
	}
	if err := db.NoteUnrecorded(ctx, tr.ID, "not committed: "+why); err != nil {
		t.Fatalf("the note does not fit where the receipt did not: %v", err)
	}
	db.Close()
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	open, err := db.OpenTurns(ctx)
	if err != nil || len(open) != 1 || open[0].Reason != "not committed: the disk was full (SQLITE_FULL)" {
		t.Fatalf("open turns after a restart: %+v, %v", open, err)
	}
}

func TestWhy(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("commit: open /home/alice/.local/share/aether/pact.sqlite-wal: no such file\nor directory"), "commit: open [path]: no such file or directory"},
		{errors.New("bad\x1b[31m \u202etext"), "bad[31m text"},
		{errors.New(strings.Repeat("x", 300)), strings.Repeat("x", 200) + "…"},
	} {
		if got := Why(c.err); got != c.want {
			t.Errorf("Why(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}
