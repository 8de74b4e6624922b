package receipts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether/aether/backend/store"
)

// TestHeadFileMark writes records in place: a shorter one after a longer one, and over a file
// of the older format (written whole, by rename), each read back as written; and a file not
// there yet.
func TestHeadFileMark(t *testing.T) {
	fresh := &HeadFile{Path: filepath.Join(t.TempDir(), "receipts.head")}
	defer fresh.Close()
	first := Head{Checkpoint: store.Checkpoint{Seq: 1, Hash: strings.Repeat("e", 64)}, ID: "r_1"}
	if err := fresh.Mark(first); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := fresh.read(); err != nil || !ok || got != first {
		t.Fatalf("a new file reads %+v %v %v, want %+v", got, ok, err, first)
	}

	path := filepath.Join(t.TempDir(), "receipts.head")
	if err := os.WriteFile(path, []byte(`{"seq":3,"hash":"`+strings.Repeat("a", 64)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &HeadFile{Path: path}
	defer h.Close()
	for _, want := range []Head{
		{Checkpoint: store.Checkpoint{Seq: 1234567890, Hash: strings.Repeat("b", 64)}, ID: "r_" + strings.Repeat("c", 24)},
		{Checkpoint: store.Checkpoint{Seq: 4, Hash: strings.Repeat("d", 64)}},
	} {
		if err := h.Mark(want); err != nil {
			t.Fatal(err)
		}
		got, ok, err := (&HeadFile{Path: path}).read()
		if err != nil || !ok || got != want {
			t.Fatalf("read %+v %v %v, want %+v", got, ok, err, want)
		}
		if fi, _ := os.Stat(path); fi.Size() != headSize {
			t.Errorf("the file is %d bytes, want %d", fi.Size(), headSize)
		}
	}
}
