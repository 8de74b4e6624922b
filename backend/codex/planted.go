package codex

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// ownerSideNames are the names in a workspace that make a tool on the owner's side run code or
// take instructions without being asked to (docs/confinement.md, "What a read_write turn may
// not leave behind"): version-control metadata, whose config and hooks git or hg run on the
// next status (W23), direnv's file, editors' folder settings, and Codex's own instructions,
// skills and project config, read by the owner's Codex (W22).
var ownerSideNames = []string{
	".git", ".hg", ".envrc", ".vscode", ".idea",
	"AGENTS.md", "AGENTS.override.md", ".codex", ".agents",
}

// guardedScan fingerprints what a read_write turn may not plant: every entry at or under an
// owner-side name, and every symlink, keyed by slash path.
type guardedScan struct {
	entries map[string]guardedEntry
	partial bool // entry cap reached
}

// guardedEntry is one entry's fingerprint: what any change to it changes.
type guardedEntry struct {
	fp     string
	empty  bool   // an empty file, or a folder (whether it is empty, the entries under it tell)
	target string // a symlink's
}

// scanGuarded walks dir through an os.Root (no symlink is followed) and fingerprints the
// guarded entries; other entries cost a directory read, never a stat.
func scanGuarded(dir string) (guardedScan, error) {
	s := guardedScan{entries: map[string]guardedEntry{}}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return s, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	seen := 0
	err = fs.WalkDir(root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if seen++; seen > maxDigestEntries {
			s.partial = true
			return fs.SkipAll
		}
		if err != nil {
			if p == "." {
				return err
			}
			return nil // an unreadable folder cannot have been planted in by the turn either
		}
		if e.Type()&fs.ModeSymlink == 0 && ownerSideAt(p) == "" {
			return nil
		}
		s.entries[p] = guardedFingerprint(root, p, e)
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("walk workspace: %w", err)
	}
	return s, nil
}

func guardedFingerprint(root *os.Root, p string, e fs.DirEntry) guardedEntry {
	info, err := e.Info()
	if err != nil {
		return guardedEntry{fp: "error " + err.Error()}
	}
	if info.IsDir() { // a folder's own times move with what it holds, which is fingerprinted
		return guardedEntry{fp: info.Mode().String(), empty: true}
	}
	g := guardedEntry{fp: fmt.Sprintf("%s %d %d", info.Mode(), info.Size(), info.ModTime().UnixNano()),
		empty: info.Mode().IsRegular() && info.Size() == 0}
	if stamp, _, ok := changeStamp(info); ok {
		g.fp += " " + stamp
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		if g.target, err = root.Readlink(filepath.FromSlash(p)); err != nil {
			g.fp += " link-error " + err.Error()
		}
		g.fp += " -> " + g.target
	}
	return g
}

// ownerSideAt returns the path of the outermost owner-side name in p, or "".
func ownerSideAt(p string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		for _, name := range ownerSideNames {
			if strings.EqualFold(part, name) { // a case-folding file system opens .Git as .git
				return strings.Join(parts[:i+1], "/")
			}
		}
	}
	return ""
}

// plantedPaths lists what the turn added or changed that it may not leave: an owner-side
// entry (reported at its outermost owner-side name), or a symlink whose target leaves the
// workspace (which tools on the owner's side, unlike the view, would follow).
func plantedPaths(before, after guardedScan) []string {
	var planted []string
	for p, e := range after.entries {
		if before.entries[p] == e {
			continue
		}
		at := ownerSideAt(p)
		if at == "" {
			if !linkLeaves(p, e.target) {
				continue
			}
			at = p
		}
		if !slices.Contains(planted, at) && !emptyAt(after, at) {
			planted = append(planted, at)
		}
	}
	slices.Sort(planted)
	// Keep only the outermost of nested findings: moving it moves the rest.
	return slices.DeleteFunc(planted, func(p string) bool {
		return slices.ContainsFunc(planted, func(q string) bool { return q != p && strings.HasPrefix(p, q+"/") })
	})
}

// emptyAt reports whether at is an empty folder or an empty file: nothing a tool can run or
// read instructions from. Codex itself leaves empty .git, .codex and .agents folders at the
// top of a writable workspace (its own sandbox's mount points).
func emptyAt(s guardedScan, at string) bool {
	if !s.entries[at].empty {
		return false
	}
	for p := range s.entries {
		if strings.HasPrefix(p, at+"/") {
			return false
		}
	}
	return true
}

// linkLeaves reports whether a symlink at p (slash path in the workspace) points out of it.
func linkLeaves(p, target string) bool {
	if target == "" || path.IsAbs(target) || filepath.IsAbs(target) {
		return true
	}
	joined := path.Join(path.Dir(p), filepath.ToSlash(target))
	return joined == ".." || strings.HasPrefix(joined, "../")
}

// quarantine moves each planted path out of the workspace into a folder of its own under
// the runner's state dir (<data dir>/codex/quarantine), where nothing runs it and the owner
// can still look at it; a path that cannot be moved there (another file system) is removed.
// It returns what it did, in words for the turn's reason, which never names the data dir.
func (r *Runner) quarantine(workspace string, planted []string) (string, error) {
	root, err := r.stateDir()
	if err != nil {
		return "", err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(root, "quarantine", r.now().UTC().Format("20060102T150405Z")+"-"+hex.EncodeToString(b[:]))
	moved, removed := 0, 0
	for _, p := range planted {
		src, dst := filepath.Join(workspace, filepath.FromSlash(p)), filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return "", err
		}
		if os.Rename(src, dst) == nil {
			moved++
			continue
		}
		if err := os.RemoveAll(src); err != nil {
			return "", fmt.Errorf("remove %s: %w", p, err)
		}
		removed++
	}
	r.logger().Warn("planted paths taken out of the workspace", "workspace", workspace, "quarantine", dir, "moved", moved, "removed", removed)
	switch {
	case removed == 0:
		return "moved to the node's quarantine", nil
	case moved == 0:
		return "removed", nil
	}
	return fmt.Sprintf("%d moved to the node's quarantine, %d removed", moved, removed), nil
}
