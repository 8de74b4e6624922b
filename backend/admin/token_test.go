package admin

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestLoadOrCreateToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "admin.token")
	tok, err := LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) != 32 {
		t.Fatalf("token %q: %d bytes, %v", tok, len(raw), err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %#o", fi.Mode().Perm())
	}
	again, err := LoadOrCreateToken(path)
	if err != nil || again != tok {
		t.Fatalf("second load %q, %v; want %q", again, err, tok)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".admin.token.tmp-*")); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}

	t.Run("open to other users is refused", func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("no permission bits on Windows")
		}
		for _, mode := range []os.FileMode{0o640, 0o604, 0o620} {
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadOrCreateToken(path); err == nil || !strings.Contains(err.Error(), "other users") {
				t.Fatalf("mode %#o: %v", mode, err)
			}
		}
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := LoadOrCreateToken(path); err != nil || got != tok {
			t.Fatalf("after chmod 600: %q %v", got, err)
		}
	})

	t.Run("damaged file is refused", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.token")
		for _, content := range []string{"", "short", strings.Repeat("A", 44), tok + "x"} {
			if err := os.WriteFile(bad, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadOrCreateToken(bad); err == nil {
				t.Fatalf("content %q accepted", content)
			}
		}
		if _, err := LoadOrCreateToken(dir); err == nil {
			t.Fatal("a directory was accepted")
		}
	})
}
