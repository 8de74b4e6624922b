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
	"time"
)

// Limits of the read_only workspace digest: past maxDigestEntries the walk stops, and once
// maxHashBytes of content were hashed the remaining files count by their metadata only.
const (
	maxDigestEntries = 200_000
	maxHashBytes     = 256 << 20
)

// racyWindow: a file changed this close to the walk's start, or after it, could be changed
// again within the same timestamp tick (a kernel tick on ext4, 2 s on FAT), which its ctime
// would not show: its content is hashed as well. The window also covers a network
// filesystem's server whose clock runs a few seconds behind this one.
const racyWindow = 10 * time.Second

// workspaceDigest fingerprints every entry under a workspace, keyed by slash path.
type workspaceDigest struct {
	entries map[string]string
	hashed  map[string]bool // the files whose fingerprint holds their content's hash
	partial bool            // entry cap reached
}

// digestWorkspace walks dir through an os.Root, so no symlink is followed out of it: a link
// is recorded with its target, never read through. An entry's fingerprint is its mode, size,
// mtime and, where the system gives them, its inode and ctime (changeStamp), which any
// change to it between two walks changes. The content of a file is hashed as well when its
// ctime is unknown or racy: within racyWindow of now, or after it.
func digestWorkspace(dir string, now time.Time) (workspaceDigest, error) {
	racy := now.Add(-racyWindow)
	return walkDigest(dir, func(_ string, ctime time.Time, known bool) bool { return !known || ctime.After(racy) })
}

// redigest walks dir again, to compare with before: it hashes the files before hashed, and
// only those, so that the fingerprints of unchanged entries are equal.
func redigest(dir string, before workspaceDigest) (workspaceDigest, error) {
	return walkDigest(dir, func(p string, _ time.Time, _ bool) bool { return before.hashed[p] })
}

// walkDigest fingerprints every entry under dir, hashing the files hash picks.
func walkDigest(dir string, hash func(p string, ctime time.Time, known bool) bool) (workspaceDigest, error) {
	d := workspaceDigest{entries: map[string]string{}, hashed: map[string]bool{}}
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
		d.entries[p] = d.fingerprint(root, p, e, hash, &budget, buf)
		return nil
	})
	if walkErr != nil {
		return d, fmt.Errorf("walk workspace: %w", walkErr)
	}
	return d, nil
}

func (d *workspaceDigest) fingerprint(root *os.Root, p string, e fs.DirEntry, hash func(string, time.Time, bool) bool, budget *int64, buf []byte) string {
	info, err := e.Info()
	if err != nil {
		return "error " + err.Error()
	}
	fp := fmt.Sprintf("%s %d %d", info.Mode(), info.Size(), info.ModTime().UnixNano())
	stamp, ctime, known := changeStamp(info)
	if known {
		fp += " " + stamp
	}
	name := filepath.FromSlash(p)
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := root.Readlink(name)
		if err != nil {
			return fp + " link-error " + err.Error()
		}
		return fp + " -> " + target
	case info.Mode().IsRegular() && *budget > 0 && hash(p, ctime, known):
		d.hashed[p] = true
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
