package codex

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkDigestWorkspace digests a workspace of 2,000 small files in 20 folders, as a
// read_only turn does twice.
func BenchmarkDigestWorkspace(b *testing.B) {
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
	b.ReportAllocs()
	for b.Loop() {
		if _, err := digestWorkspace(ws); err != nil {
			b.Fatal(err)
		}
	}
}
