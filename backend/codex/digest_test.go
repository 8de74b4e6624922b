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
	before, err := digestWorkspace(ws, time.Now())
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
	if after, _ := redigest(ws, before); len(changedPaths(before, after)) != 0 {
		t.Fatalf("followed a link: %q", changedPaths(before, after))
	}

	// A file created and removed again leaves the directory's mtime changed.
	sub := filepath.Join(ws, "sub")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(sub, old, old); err != nil {
		t.Fatal(err)
	}
	before, _ = digestWorkspace(ws, time.Now())
	mustWrite(t, filepath.Join(sub, "tmp"), "x")
	os.Remove(filepath.Join(sub, "tmp"))
	after, _ := redigest(ws, before)
	if got := changedPaths(before, after); !slices.Equal(got, []string{"sub"}) {
		t.Fatalf("changed %q", got)
	}
}

// TestDigestCtime: a file not changed within racyWindow is fingerprinted by its metadata
// alone, and a rewrite that puts its size and mtime back is caught by its ctime; a racy file
// is hashed, in both walks, and what is unchanged compares equal.
func TestDigestCtime(t *testing.T) {
	ws := t.TempDir()
	f := filepath.Join(ws, "f.txt")
	mustWrite(t, f, "one")
	mustWrite(t, filepath.Join(ws, "g.txt"), "same")
	for _, c := range []struct {
		name   string
		now    time.Time
		hashed bool
	}{{"settled", time.Now().Add(time.Hour), false}, {"racy", time.Now(), true}} {
		t.Run(c.name, func(t *testing.T) {
			before, err := digestWorkspace(ws, c.now)
			if err != nil {
				t.Fatal(err)
			}
			if before.hashed["f.txt"] != c.hashed || before.hashed["g.txt"] != c.hashed {
				t.Fatalf("hashed %v, want %v for both files", before.hashed, c.hashed)
			}
			if again, _ := redigest(ws, before); len(changedPaths(before, again)) != 0 {
				t.Fatalf("an unchanged workspace changed: %q", changedPaths(before, again))
			}
			st, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, f, "two")
			if err := os.Chtimes(f, st.ModTime(), st.ModTime()); err != nil {
				t.Fatal(err)
			}
			after, err := redigest(ws, before)
			if err != nil {
				t.Fatal(err)
			}
			if got := changedPaths(before, after); !slices.Equal(got, []string{"f.txt"}) {
				t.Fatalf("changed %q, want f.txt (size and mtime put back)", got)
			}
			if after.hashed["f.txt"] != c.hashed {
				t.Fatalf("the second walk hashed %v", after.hashed)
			}
		})
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
