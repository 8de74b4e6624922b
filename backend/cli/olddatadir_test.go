package cli

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReceiptsVerifyOldDataDir: `aether receipts verify` accepts a data dir written by the code
// before the ledger moved out of the store (testdata/datadir-before-ledger, made by receipts'
// TestWriteDataDir with test keys: eight receipts, a key rotation after the fifth, its
// receipts.head), and still refuses it with a receipt edited.
func TestReceiptsVerifyOldDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	from := filepath.Join("testdata", "datadir-before-ledger")
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		name := e.Name()
		if strings.HasSuffix(name, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if b, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
			name = strings.TrimSuffix(name, ".gz")
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if code := Main([]string{"receipts", "verify", "--data-dir", dir}, Env{Stdout: &out, Stderr: &out}); code != 0 ||
		!strings.Contains(out.String(), "seq 8") {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	t.Log(out.String())
	rawEdit(t, filepath.Join(dir, "pact.sqlite"))
	out.Reset()
	if code := Main([]string{"receipts", "verify", "--data-dir", dir}, Env{Stdout: &out, Stderr: &out}); code != 1 {
		t.Fatalf("an edited receipt: exit %d\n%s", code, out.String())
	}
}

// rawEdit changes the stored reason of the failed receipts in the file's bytes, as someone editing it would.
func rawEdit(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.ReplaceAll(b, []byte("codex exited 1"), []byte("codex exited 2"))
	if bytes.Equal(edited, b) {
		t.Fatal("no reason to edit")
	}
	b = edited
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
