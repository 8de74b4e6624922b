package codex

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aether/aether/backend/work"
)

// workFiles is what the node found the turn changed in its workspace (docs/wire.md, "What the
// turn did"): the digests of the workspace before and after, and each entry added, modified or
// deleted, a regular file with its new content's SHA-256.
type workFiles struct {
	before, after string
	partial       bool
	list          work.List[work.File]
}

// sum is the node's digest of the workspace: "sha256:" and the SHA-256 over every entry's
// slash path, a NUL, its fingerprint and a newline, in path order. Equal digests mean the
// node saw no entry change; fingerprints hold times and inodes, so the digest is the node's
// to compare, not a hash of the content.
func (d workspaceDigest) sum() string {
	paths := make([]string, 0, len(d.entries))
	for p := range d.entries {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	h := sha256.New()
	for _, p := range paths {
		io.WriteString(h, p+"\x00"+d.entries[p]+"\n")
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// compareWorkspace lists what changed between before and after, hashing the new content of
// the regular files added or modified (up to maxHashBytes in all; past it a file has no hash).
// A folder whose entries changed is not listed as modified itself: its entries are.
func compareWorkspace(dir string, before, after workspaceDigest) *workFiles {
	f := &workFiles{before: before.sum(), after: after.sum(), partial: before.partial || after.partial}
	root, err := os.OpenRoot(dir)
	if err == nil {
		defer root.Close()
	}
	budget := int64(maxHashBytes)
	for _, p := range changedPaths(before, after) {
		if p == "." {
			continue
		}
		was, had := before.entries[p]
		now, has := after.entries[p]
		e := work.File{Path: work.Text(p, work.MaxPathBytes), Kind: work.Modified}
		switch {
		case !had:
			e.Kind = work.Added
		case !has:
			e.Kind, now = work.Deleted, was
		case entryType(was) == work.TypeDir && entryType(now) == work.TypeDir:
			continue
		}
		e.Type = entryType(now)
		if e.Type == "" && e.Kind != work.Deleted && root != nil {
			e.Size, e.SHA256 = hashNew(root, p, &budget)
		}
		f.list.Add(e)
	}
	return f
}

// entryType reads the type from a fingerprint, which begins with the entry's fs.FileMode
// (fingerprint): "" for a regular file.
func entryType(fp string) string {
	switch {
	case strings.HasPrefix(fp, "-"):
		return ""
	case strings.HasPrefix(fp, "d"):
		return work.TypeDir
	case strings.HasPrefix(fp, "L"):
		return work.TypeSymlink
	}
	return work.TypeOther
}

// hashNew hashes the file at slash path p through root, when what is left of budget covers it
// whole; otherwise, or when it is no longer a regular file, it gives what it could.
func hashNew(root *os.Root, p string, budget *int64) (*int64, string) {
	f, err := root.OpenFile(filepath.FromSlash(p), os.O_RDONLY|openNoBlock, 0)
	if err != nil {
		return nil, ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, ""
	}
	size := st.Size()
	if size > *budget {
		return &size, ""
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, size+1))
	*budget -= n
	if err != nil || n != size {
		return &size, "" // it changed while hashed: no hash rather than a wrong one
	}
	return &size, hex.EncodeToString(h.Sum(nil))
}
