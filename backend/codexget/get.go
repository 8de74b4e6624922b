package codexget

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aether/aether/backend/fsutil"
)

var (
	// ErrIntegrity: the download is not the pinned package (tampered, or another file).
	ErrIntegrity = errors.New("the download does not match the pinned sha512")
	// ErrTruncated: the download ended before the pinned size, or went past it.
	ErrTruncated = errors.New("the download is not the pinned size")
	// ErrUnreachable: the registry could not be reached or answered with an error.
	ErrUnreachable = errors.New("cannot download Codex")
	// ErrUnsafeArchive: the package holds an entry Aether never unpacks (docs/threats.md, X3–X6).
	ErrUnsafeArchive = errors.New("the package holds an entry that is not unpacked")
	// errNotPinnedCodex: the unpacked codex is not codex-cli Version (X7).
	errNotPinnedCodex = errors.New("the unpacked codex is not codex-cli " + Version)
	// ErrStalled: the registry sent nothing for Getter.StallTimeout (X12).
	ErrStalled = errors.New("the download stalled")
	// ErrBusy: another Get is running.
	ErrBusy = errors.New("Codex is being downloaded already")
)

// DefaultStallTimeout is how long a download may receive nothing before it is given up.
const DefaultStallTimeout = 60 * time.Second

// Progress is how far a download is, in bytes.
type Progress struct {
	Done, Total int64
}

// Getter gets the pinned Codex into Dir/<Version>. Fields must not change after the first Get.
type Getter struct {
	Dir      string   // e.g. <data dir>/codex-bin
	Registry string   // default DefaultRegistry
	Platform Platform // default ForThisMachine()
	Client   *http.Client
	// StallTimeout ends a download that receives nothing for so long, headers included
	// (default DefaultStallTimeout).
	StallTimeout time.Duration

	mu sync.Mutex

	checkMu sync.Mutex
	checked fileID // bin/codex as it was when its hash last matched its record
}

// Binary is the installed codex, or "" when there is none. Only a complete unpack is ever at
// Dir/<Version> (Get renames it there whole), with the sha256 of its bin/codex recorded
// beside it (manifestName). Binary checks the file against that record: it hashes it again
// when the file is not the one it last found matching (another inode, size, modification or
// change time; docs/threats.md X11), and a file that does not match, or has no record, is an
// error: it never runs.
func (g *Getter) Binary() (string, error) {
	bin := filepath.Join(g.Dir, Version, "bin", "codex")
	st, err := os.Lstat(bin)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o100 == 0 {
		return "", nil
	}
	g.checkMu.Lock()
	defer g.checkMu.Unlock()
	id := idOf(st)
	if id == g.checked {
		return bin, nil
	}
	if err := checkManifest(filepath.Join(g.Dir, Version)); err != nil {
		g.checked = fileID{}
		return "", err
	}
	g.checked = id
	return bin, nil
}

// Get downloads, checks and unpacks the pinned package unless it is there, and returns the
// codex binary. progress, if set, is called as bytes arrive (at most every MiB) and must not
// block. On any failure nothing is left in Dir but what was there before.
func (g *Getter) Get(ctx context.Context, progress func(Progress)) (string, error) {
	if !g.mu.TryLock() {
		return "", ErrBusy
	}
	defer g.mu.Unlock()
	if bin, err := g.Binary(); bin != "" && err == nil {
		return bin, nil
	}
	p, err := g.platform()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(g.Dir, 0o700); err != nil {
		return "", fmt.Errorf("codex folder %s: %w", g.Dir, err)
	}
	g.removePartials()
	work, err := os.MkdirTemp(g.Dir, ".partial-")
	if err != nil {
		return "", fmt.Errorf("codex folder %s: %w", g.Dir, err)
	}
	defer os.RemoveAll(work)
	tgz := filepath.Join(work, "package.tgz")
	if err := g.download(ctx, p, tgz, progress); err != nil {
		return "", err
	}
	unpacked := filepath.Join(work, "codex")
	if err := unpack(tgz, unpacked, p.Triple, defaultLimits); err != nil {
		return "", err
	}
	if err := checkBinary(ctx, filepath.Join(unpacked, "bin", "codex"), work); err != nil {
		return "", err
	}
	if err := writeManifest(unpacked); err != nil {
		return "", err
	}
	final := filepath.Join(g.Dir, Version)
	if _, err := os.Lstat(final); err == nil { // a broken one (no runnable bin/codex): set aside, removed with work
		if err := os.Rename(final, filepath.Join(work, "old")); err != nil {
			return "", fmt.Errorf("replace %s: %w", final, err)
		}
	}
	if err := os.Rename(unpacked, final); err != nil {
		return "", fmt.Errorf("put Codex in place: %w", err)
	}
	if err := fsutil.SyncDir(g.Dir); err != nil {
		return "", err
	}
	return g.Binary()
}

func (g *Getter) platform() (Platform, error) {
	if g.Platform.Name != "" {
		return g.Platform, nil
	}
	return ForThisMachine()
}

// removePartials removes what a Get stopped by a crash left behind.
func (g *Getter) removePartials() {
	left, _ := filepath.Glob(filepath.Join(g.Dir, ".partial-*"))
	for _, dir := range left {
		os.RemoveAll(dir)
	}
}

// download writes the tarball to path, hashing it as it comes, and fails unless it is exactly
// the pinned size and hash (X1, X2).
func (g *Getter) download(ctx context.Context, p Platform, path string, progress func(Progress)) error {
	registry := strings.TrimRight(g.Registry, "/")
	if registry == "" {
		registry = DefaultRegistry
	}
	src := p.TarballURL(registry)
	host := src
	if u, err := url.Parse(src); err == nil {
		host = u.Host
	}
	// A registry that stops sending, before or after its headers, ends the download (X12).
	stall := g.StallTimeout
	if stall <= 0 {
		stall = DefaultStallTimeout
	}
	dctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(stall, func() { cancel(ErrStalled) })
	defer watchdog.Stop()
	req, err := http.NewRequestWithContext(dctx, http.MethodGet, src, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	client := g.Client
	if client == nil {
		client = http.DefaultClient
	}
	var n int64
	stalled := func() error {
		return fmt.Errorf("%w: %s sent nothing for %s (%d of %d bytes came); try again", ErrStalled, host, stall, n, p.Size)
	}
	resp, err := client.Do(req)
	if err != nil && context.Cause(dctx) == ErrStalled {
		return stalled()
	}
	if err != nil {
		return fmt.Errorf("%w: %s cannot be reached (%v); check the connection and try again", ErrUnreachable, host, unwrapURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s answered %q for %s; try again later", ErrUnreachable, host, resp.Status, p.Package())
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	sum := sha512.New()
	w := &progressWriter{w: io.MultiWriter(f, sum), total: p.Size, fn: progress}
	n, err = io.Copy(w, io.LimitReader(&stallReader{r: resp.Body, watchdog: watchdog, stall: stall}, p.Size+1))
	w.report()
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("%w: stopped", ErrUnreachable)
	case err != nil && context.Cause(dctx) == ErrStalled:
		return stalled()
	}
	if n != p.Size {
		return fmt.Errorf("%w: got %d bytes of %s, %d expected (%v); try again", ErrTruncated, n, p.Package(), p.Size, errOrEnd(err))
	}
	if err != nil {
		return fmt.Errorf("%w: the download from %s broke off: %v; try again", ErrTruncated, host, err)
	}
	want, err := decodeIntegrity(p.Integrity)
	if err != nil {
		return err
	}
	if !bytes.Equal(sum.Sum(nil), want) {
		return fmt.Errorf("%w: %s from %s is not the package Aether pins; nothing was unpacked", ErrIntegrity, p.Package(), host)
	}
	return f.Close()
}

// stallReader restarts the download's watchdog whenever bytes come.
type stallReader struct {
	r        io.Reader
	watchdog *time.Timer
	stall    time.Duration
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.watchdog.Reset(s.stall)
	}
	return n, err
}

func errOrEnd(err error) any {
	if err == nil {
		return "the connection ended"
	}
	return err
}

// unwrapURL drops the "Get <url>:" prefix net/http adds: the host is said already.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// decodeIntegrity reads npm's "sha512-<base64>".
func decodeIntegrity(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, "sha512-")
	if !ok {
		return nil, fmt.Errorf("pinned integrity %q is not sha512", s)
	}
	sum, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(sum) != sha512.Size {
		return nil, fmt.Errorf("pinned integrity %q is not a sha512 digest", s)
	}
	return sum, nil
}

// progressWriter reports the bytes written, every MiB.
type progressWriter struct {
	w        io.Writer
	total    int64
	done     int64
	reported int64
	fn       func(Progress)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += int64(n)
	if p.done-p.reported >= 1<<20 {
		p.report()
	}
	return n, err
}

func (p *progressWriter) report() {
	p.reported = p.done
	if p.fn != nil {
		p.fn(Progress{Done: p.done, Total: p.total})
	}
}

// checkBinary runs the unpacked `codex --version` before it is put in place: it must be the
// pinned version. HOME and CODEX_HOME point into the work folder, away from the owner's.
func checkBinary(ctx context.Context, bin, work string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	home := filepath.Join(work, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "CODEX_HOME=" + home}
	cmd.Dir = home
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%w: it does not run (%v); it was not put in place", errNotPinnedCodex, err)
	}
	if !strings.Contains(string(out), "codex-cli "+Version) {
		return fmt.Errorf("%w: it says %q; it was not put in place", errNotPinnedCodex, strings.TrimSpace(string(out)))
	}
	return nil
}
