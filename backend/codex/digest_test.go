package codex

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestDigest(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	outside := filepath.Join(dir, "outside.txt")
	mustWrite(t, outside, "secret")
	mustWrite(t, filepath.Join(ws, "sub", "f.txt"), "one")
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir), filepath.Join(ws, "dirlink")); err != nil {
		t.Fatal(err)
	}
	before, err := digestWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(before.entries))
	for k := range before.entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{".", "dirlink", "link", "sub", "sub/f.txt"}) {
		t.Fatalf("walked %q: symlinks must not be followed", keys)
	}

	// A change outside, reachable only through a link, is not the workspace's.
	mustWrite(t, outside, "changed")
	if after, _ := digestWorkspace(ws); len(changedPaths(before, after)) != 0 {
		t.Fatalf("followed a link: %q", changedPaths(before, after))
	}

	// Same size, same mtime, other content: still caught.
	f := filepath.Join(ws, "sub", "f.txt")
	st, _ := os.Stat(f)
	mustWrite(t, f, "two")
	if err := os.Chtimes(f, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	after, err := digestWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	if got := changedPaths(before, after); !slices.Equal(got, []string{"sub/f.txt"}) {
		t.Fatalf("changed %q", got)
	}

	// A file created and removed again leaves the directory's mtime changed.
	sub := filepath.Join(ws, "sub")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(sub, old, old); err != nil {
		t.Fatal(err)
	}
	before, _ = digestWorkspace(ws)
	mustWrite(t, filepath.Join(sub, "tmp"), "x")
	os.Remove(filepath.Join(sub, "tmp"))
	after, _ = digestWorkspace(ws)
	if got := changedPaths(before, after); !slices.Equal(got, []string{"sub"}) {
		t.Fatalf("changed %q", got)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
