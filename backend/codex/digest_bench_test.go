package codex

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkDigestWorkspace digests a workspace of 2,000 small files in 20 folders twice, as
// a read_only turn does: settled, none changed within racyWindow (the usual case, only
// metadata is read), and just written (every file is racy, so every file is hashed).
func BenchmarkDigestWorkspace(b *testing.B) {
	ws := benchWorkspace(b)
	for _, c := range []struct {
		name string
		now  time.Time
	}{{"settled", time.Now().Add(time.Hour)}, {"just-written", time.Now()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				before, err := digestWorkspace(ws, c.now)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := redigest(ws, before); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScanGuarded looks through the same workspace twice for what a read_write turn may
// not plant (W23), as such a turn does.
func BenchmarkScanGuarded(b *testing.B) {
	ws := benchWorkspace(b)
	b.ReportAllocs()
	for b.Loop() {
		before, err := scanGuarded(ws)
		if err != nil {
			b.Fatal(err)
		}
		after, err := scanGuarded(ws)
		if err != nil || len(plantedPaths(before, after)) != 0 {
			b.Fatal(err)
		}
	}
}

// benchWorkspace is 2,000 small files in 20 folders.
func benchWorkspace(b *testing.B) string {
	ws := b.TempDir()
	for i := range 2000 {
		dir := filepath.Join(ws, fmt.Sprintf("d%02d", i%20))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.go", i)), make([]byte, 1500), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return ws
}

// BenchmarkWorkFiles is what a receipt's files add to the digests (docs/wire.md, "What the turn
// did"): both digests' sums and the comparison of a settled workspace of the same tree.
func BenchmarkWorkFiles(b *testing.B) {
	ws := benchWorkspace(b)
	before, err := digestWorkspace(ws, time.Now().Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	after, err := redigest(ws, before)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if f := compareWorkspace(ws, before, after); f.list.Count != 0 || f.before != f.after {
			b.Fatal("a settled workspace changed")
		}
	}
}
