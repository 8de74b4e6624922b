package codexget

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aether/aether/backend/fsutil"
)

// manifestName is the record, beside bin/ in <Dir>/<Version>, of the sha256 of the bin/codex
// Get unpacked and checked: "<hex>  bin/codex\n", as sha256sum writes it.
const manifestName = "codex.sha256"

// writeManifest records the sha256 of dir's bin/codex, before dir is put in place.
func writeManifest(dir string) error {
	sum, err := hashFile(filepath.Join(dir, "bin", "codex"))
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(dir, manifestName), []byte(sum+"  bin/codex\n"), 0o644)
}

// checkManifest hashes dir's bin/codex and compares it with its record.
func checkManifest(dir string) error {
	rec, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return fmt.Errorf("the Codex in %s has no record of what was unpacked (%s); it does not run: press Get Codex to get it again", dir, manifestName)
	}
	want, _, _ := strings.Cut(string(rec), " ")
	got, err := hashFile(filepath.Join(dir, "bin", "codex"))
	if err != nil {
		return fmt.Errorf("the Codex in %s cannot be read: %w", dir, err)
	}
	if got != want {
		return fmt.Errorf("the Codex in %s is not the one Aether unpacked: bin/codex has sha256 %s, %s recorded %s; it does not run: remove the folder and press Get Codex to get it again", dir, got, manifestName, want)
	}
	return nil
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fileID is what changes when a file is replaced or written: a write changes the size or the
// modification time, and always the change time, which no one but the kernel can set.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime time.Time
}
