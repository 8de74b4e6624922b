package codex

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Limits of the read_only workspace digest: past maxDigestEntries the walk stops, and once
// maxHashBytes of content were hashed the remaining files count by name, size and mtime only.
const (
	maxDigestEntries = 200_000
	maxHashBytes     = 256 << 20
)

// workspaceDigest fingerprints every entry under a workspace, keyed by slash path.
type workspaceDigest struct {
	entries map[string]string
	partial bool // entry cap reached
}

// digestWorkspace walks dir through an os.Root, so no symlink is followed out of it: a link
// is recorded with its target, never read through.
func digestWorkspace(dir string) (workspaceDigest, error) {
	d := workspaceDigest{entries: map[string]string{}}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return d, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	budget := int64(maxHashBytes)
	buf := make([]byte, 32<<10) // one for every file: a copy's own buffer would be garbage per file
	walkErr := fs.WalkDir(root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if len(d.entries) >= maxDigestEntries {
			d.partial = true
			return fs.SkipAll
		}
		if err != nil {
			d.entries[p] = "error " + err.Error()
			if e != nil && e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		d.entries[p] = fingerprint(root, p, e, &budget, buf)
		return nil
	})
	if walkErr != nil {
		return d, fmt.Errorf("walk workspace: %w", walkErr)
	}
	return d, nil
}

func fingerprint(root *os.Root, p string, e fs.DirEntry, budget *int64, buf []byte) string {
	info, err := e.Info()
	if err != nil {
		return "error " + err.Error()
	}
	fp := fmt.Sprintf("%s %d %d", info.Mode(), info.Size(), info.ModTime().UnixNano())
	name := filepath.FromSlash(p)
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := root.Readlink(name)
		if err != nil {
			return fp + " link-error " + err.Error()
		}
		return fp + " -> " + target
	case info.Mode().IsRegular() && *budget > 0:
		sum, n, err := hashFile(root, name, *budget, buf)
		*budget -= n
		if err != nil {
			return fp + " read-error " + err.Error()
		}
		return fp + " " + sum
	}
	return fp
}

func hashFile(root *os.Root, name string, max int64, buf []byte) (string, int64, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|openNoBlock, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", 0, errors.New("not a regular file")
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, io.LimitReader(f, max), buf)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// changedPaths lists the entries that were added, removed or changed, sorted.
func changedPaths(before, after workspaceDigest) []string {
	var changed []string
	for p, fp := range after.entries {
		if before.entries[p] != fp {
			changed = append(changed, p)
		}
	}
	for p := range before.entries {
		if _, ok := after.entries[p]; !ok {
			changed = append(changed, p)
		}
	}
	slices.Sort(changed)
	return changed
}
