package codex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/confine"
)

// Versions: the runner was written against MinVersion; TestedVersion is the newest release
// checked against it, the one Aether pins and gets (codexget.Version). Newer ones are
// accepted with a warning.
const (
	MinVersion    = "0.169.0"
	TestedVersion = codexget.Version
)

const checkTimeout = 20 * time.Second

// Health is what the app shows about codex and what `node serve` logs at start.
type Health struct {
	Found     bool
	Path      string // resolved binary
	Version   string // e.g. "0.169.0"
	VersionOK bool   // at least MinVersion
	LoggedIn  bool   // `codex login status` exit 0 (stored credentials)
	APIKey    bool   // CODEX_API_KEY is passed to codex (exec honours it; login status does not count it)
	// Confinement is whether turns can be confined here; without it no turn runs.
	Confinement confine.Status
	// Credential is how codex reaches its model and whether its commands could read how.
	Credential Credential
	Warning    string // e.g. newer than tested
	Error      string // first problem that stops turns, empty when ready
}

// Ready reports whether turns can run.
func (h Health) Ready() bool { return h.Error == "" }

// Check looks for codex, reads its version and whether it is signed in. A missing binary
// fails at once (S12).
func (r *Runner) Check(ctx context.Context) Health {
	h := r.check(ctx)
	h.Confinement = r.sandbox().Check(ctx)
	if !h.Confinement.Available && h.Error == "" {
		h.Error = h.Confinement.Text()
	}
	return h
}

func (r *Runner) check(ctx context.Context) Health {
	var h Health
	h.Credential = r.credential()
	bin, err := r.binary()
	if err != nil {
		h.Error = err.Error()
		return h
	}
	h.Found, h.Path = true, bin
	h.APIKey = h.Credential.Kind == CredentialAPIKeyEnv
	v, err := r.readVersion(ctx, bin)
	if err != nil {
		h.Error = err.Error()
		return h
	}
	h.Version = v
	if NewerThan(MinVersion, v) {
		h.Error = fmt.Sprintf("codex %s is too old: %s or newer is needed", v, MinVersion)
		return h
	}
	h.VersionOK = true
	var warnings []string
	if NewerThan(v, TestedVersion) {
		warnings = append(warnings, fmt.Sprintf("codex %s is newer than the last version tested (%s)", v, TestedVersion))
	}
	h.Warning = strings.Join(warnings, "; ")
	stdout, stderr, code, err := r.runSmall(ctx, bin, "login", "status")
	switch {
	case err != nil:
		h.Error = "codex login status: " + err.Error()
		return h
	case code == 0:
		h.LoggedIn = true
	case code != 1:
		h.Error = fmt.Sprintf("codex login status exited with code %d: %s", code,
			oneLine(lastErrorLine(stderr+"\n"+stdout), maxReasonRunes))
		return h
	}
	if h.LoggedIn && h.Credential.Kind == CredentialNone {
		h.Credential = Credential{Kind: CredentialUnreadable, Summary: "signed in outside auth.json (cannot be handed over)",
			Problem: "codex keeps its sign-in outside " + filepath.Join(r.codexHome(), "auth.json") + " (e.g. in the system keyring), where Aether cannot give it to codex alone; " + safeCredentialHint}
	}
	h.Error = h.Credential.Problem
	return h
}

// checkVersion is Run's cached version gate: one `codex --version` per binary file. It
// returns the version, for the receipt.
func (r *Runner) checkVersion(ctx context.Context, bin string) (string, error) {
	st, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	r.mu.Lock()
	e, ok := r.versions[bin]
	r.mu.Unlock()
	if !ok || e.size != st.Size() || !e.mod.Equal(st.ModTime()) {
		v, err := r.readVersion(ctx, bin)
		if err != nil {
			return "", err // not cached: a transient failure should not stick
		}
		e = versionEntry{size: st.Size(), mod: st.ModTime(), version: v}
		r.mu.Lock()
		if r.versions == nil {
			r.versions = map[string]versionEntry{}
		}
		r.versions[bin] = e
		r.mu.Unlock()
	}
	if NewerThan(MinVersion, e.version) {
		return "", fmt.Errorf("%w: codex %s is too old: %s or newer is needed", ErrUnsupportedVersion, e.version, MinVersion)
	}
	return e.version, nil
}

type versionEntry struct {
	size    int64
	mod     time.Time
	version string
}

// readVersion runs `codex --version`, which prints "codex-cli X.Y.Z" on stdout (warnings may
// go to stderr and are ignored).
func (r *Runner) readVersion(ctx context.Context, bin string) (string, error) {
	stdout, stderr, code, err := r.runSmall(ctx, bin, "--version")
	if err != nil {
		return "", fmt.Errorf("%w: codex --version: %v", ErrUnsupportedVersion, err)
	}
	for _, line := range strings.Split(stdout, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "codex-cli "); ok {
			if _, ok := parseVersion(v); ok {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("%w: codex --version exited %d without a version: %s", ErrUnsupportedVersion, code,
		oneLine(stdout+" "+stderr, maxReasonRunes))
}

// runSmall runs a short codex command with the turn environment, in its own process group,
// with bounded output and a deadline.
func (r *Runner) runSmall(ctx context.Context, bin string, args ...string) (string, string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	home, err := os.MkdirTemp("", "aether-codex-check-")
	if err != nil {
		return "", "", -1, err
	}
	defer os.RemoveAll(home)
	var stdout, stderr cappedBuffer
	stdout.max, stderr.max = 64<<10, 64<<10
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = r.checkEnviron(home)
	cmd.Dir = home
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	setProcessGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if cmd.ProcessState != nil && groupAlive(cmd.Process) {
		_ = killGroup(cmd.Process)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && ctx.Err() == nil {
		err = nil
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %s", checkTimeout)
		}
		return stdout.String(), stderr.String(), -1, err
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode(), nil
}

// cappedBuffer keeps the first max bytes written and discards the rest.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// parseVersion reads X.Y.Z, ignoring a pre-release or build suffix.
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	s, _, _ = strings.Cut(s, "-")
	s, _, _ = strings.Cut(s, "+")
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

// NewerThan reports whether version a is strictly newer than b (both X.Y.Z).
func NewerThan(a, b string) bool {
	va, _ := parseVersion(a)
	vb, _ := parseVersion(b)
	for i := range va {
		if va[i] != vb[i] {
			return va[i] > vb[i]
		}
	}
	return false
}
