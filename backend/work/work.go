// Package work is what a turn did, as its receipt signs it (docs/wire.md, "What the turn
// did"): the commands Codex ran, the files the node found changed in the workspace, the
// patches Codex applied, and what ran them. The codex runner fills it in from Codex's
// --json events and the node's own look at the workspace; receipts signs it as the claim
// `work` of a version 2 receipt. Every list is bounded (List) and every text Codex or a
// workspace chose is escaped and cut (Text), so a hostile turn cannot make its receipt
// unreadable, misleading to the eye, or unbounded (docs/threats.md S13).
package work

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"regexp"

	"github.com/aether/aether/backend/jcs"
)

// MaxEntries bounds each list of a receipt's work: past it, only the count and the digest of
// the whole list say what else was there.
const MaxEntries = 32

// Longest texts, in bytes after escaping, before the cut marker.
const (
	MaxCommandBytes = 512
	MaxPathBytes    = 256
)

// Kinds of a changed file, as the node saw it.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
)

// Types of a changed entry other than a regular file (File.Type; "" for a regular file).
const (
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	TypeOther   = "other"
)

// Statuses of a command that Codex never reported finished (Command.Status).
const Unfinished = "unfinished"

// Work is the claim `work`. The JSON names are part of the wire contract.
type Work struct {
	Codex       string `json:"codex"`       // Codex's version, as `codex --version` printed it
	Model       string `json:"model"`       // the model the node asked for; "" = Codex's default
	Upstream    string `json:"upstream"`    // the host of the model server the node set; "" = Codex's own provider
	Sandbox     string `json:"sandbox"`     // Codex's --sandbox: read-only or workspace-write
	Confinement string `json:"confinement"` // the node's outer sandbox, e.g. "bubblewrap 0.8.0"
	// Before and After are the node's digests of the workspace around the turn ("sha256:…").
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	// Partial: the workspace had more entries than the node looks at; digests and files
	// cover the first ones.
	Partial  bool          `json:"partial,omitempty"`
	Commands List[Command] `json:"commands"`
	Files    List[File]    `json:"files"`
	Patches  List[Patch]   `json:"patches"`
}

// Command is one command Codex ran (a command_execution item).
type Command struct {
	Line       string `json:"line"`        // the command line, escaped and cut (Text)
	LineSHA256 string `json:"line_sha256"` // of the exact command line
	Status     string `json:"status"`      // Codex's: completed, failed, declined; or unfinished
	Exit       *int   `json:"exit,omitempty"`
	// Ms is the time between the node reading Codex's item.started and item.completed.
	Ms           *int64 `json:"ms,omitempty"`
	OutputSHA256 string `json:"output_sha256,omitempty"` // of aggregated_output as Codex reported it
}

// File is one entry of the workspace that the turn added, modified or deleted, as the node
// found it by comparing the workspace before and after.
type File struct {
	Path   string `json:"path"` // slash-separated, relative to the workspace; escaped and cut (Text)
	Kind   string `json:"kind"` // Added, Modified, Deleted
	Type   string `json:"type,omitempty"`
	Size   *int64 `json:"size,omitempty"`   // a regular file's, after the turn
	SHA256 string `json:"sha256,omitempty"` // a regular file's new content, hashed by the node
}

// Patch is one file change Codex reported applying (a file_change item's changes).
type Patch struct {
	Path   string `json:"path"`   // relative to the workspace when inside it; escaped and cut (Text)
	Kind   string `json:"kind"`   // Codex's: add, delete, update
	Status string `json:"status"` // Codex's: completed, failed
}

// List is a bounded list: the first MaxEntries items, how many there were, and, when there
// were more, the digest of them all: the SHA-256 (lowercase hex) over every entry's RFC 8785
// canonical JSON followed by a newline, in order. An empty list has no items member: an
// empty array does not survive every JSON store a receipt's data part goes through.
type List[T any] struct {
	Count  int    `json:"count"`
	Digest string `json:"digest,omitempty"`
	Items  []T    `json:"items,omitempty"`
	h      hash.Hash
}

// Add appends v, or only counts it and hashes it once the list is full.
func (l *List[T]) Add(v T) {
	if l.h == nil {
		l.h = sha256.New()
	}
	writeEntry(l.h, v)
	l.Count++
	if len(l.Items) < MaxEntries {
		l.Items = append(l.Items, v)
	}
	if l.Count > MaxEntries {
		l.Digest = hex.EncodeToString(l.h.Sum(nil))
	}
}

// writeEntry writes v's RFC 8785 canonical JSON and a newline to h, as the digest takes it.
func writeEntry[T any](h hash.Hash, v T) {
	b, err := jcs.Marshal(v)
	if err != nil { // entries are structs of strings and numbers: cannot fail
		panic(fmt.Sprintf("work: entry: %v", err))
	}
	h.Write(b)
	h.Write([]byte("\n"))
}

// Keep is l with its first n items at most: its count stays, and once an item is left out
// the digest of all says what they were.
func (l List[T]) Keep(n int) List[T] {
	if len(l.Items) <= n {
		return l
	}
	if l.Digest == "" { // not cut yet: every item is here
		h := sha256.New()
		for _, v := range l.Items {
			writeEntry(h, v)
		}
		l.Digest = hex.EncodeToString(h.Sum(nil))
	}
	l.Items, l.h = l.Items[:n:n], nil
	if n == 0 {
		l.Items = nil
	}
	return l
}

// Keep is w with each list cut to its first n items (List.Keep): how the ledger makes a
// receipt fit its bound without losing what the turn did (docs/threats.md T15).
func (w *Work) Keep(n int) *Work {
	c := *w
	c.Commands, c.Files, c.Patches = w.Commands.Keep(n), w.Files.Keep(n), w.Patches.Keep(n)
	return &c
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Check says why l is not a list the node writes: more items than MaxEntries, a count below
// them, a digest without a cut or a cut without one.
func (l *List[T]) Check(name string) error {
	switch {
	case len(l.Items) > MaxEntries:
		return fmt.Errorf("work.%s: %d items, at most %d", name, len(l.Items), MaxEntries)
	case l.Count < len(l.Items):
		return fmt.Errorf("work.%s: count %d is below its %d items", name, l.Count, len(l.Items))
	case l.Count > len(l.Items) && !hexDigest.MatchString(l.Digest):
		return fmt.Errorf("work.%s: cut at %d of %d items without the digest of all", name, len(l.Items), l.Count)
	case l.Count == len(l.Items) && l.Digest != "":
		return fmt.Errorf("work.%s: a digest on a list that was not cut", name)
	}
	return nil
}

// Check says why w is not work the node signs: a list out of its bounds, or a text that is
// not escaped and cut as Text makes it.
func (w *Work) Check() error {
	errs := []error{w.Commands.Check("commands"), w.Files.Check("files"), w.Patches.Check("patches")}
	for _, c := range w.Commands.Items {
		errs = append(errs, checkText("work.commands line", c.Line, MaxCommandBytes))
	}
	for _, f := range w.Files.Items {
		errs = append(errs, checkText("work.files path", f.Path, MaxPathBytes))
	}
	for _, p := range w.Patches.Items {
		errs = append(errs, checkText("work.patches path", p.Path, MaxPathBytes))
	}
	return errors.Join(errs...)
}

func checkText(what, s string, max int) error {
	if !Shown(s, max) {
		return fmt.Errorf("%s %q is not escaped and cut as the node shows text", what, s)
	}
	return nil
}
