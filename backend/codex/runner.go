// Package codex runs the Codex CLI (`codex exec`) for one turn: confined to a view of the
// brand's workspace and nothing else of the host, with codex's own sandbox for the access
// mode inside it, a minimal environment, a deadline, capped output and a before/after digest
// of the workspace (read_only's check, and the files a receipt lists). See docs/confinement.md.
package codex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aether/aether/backend/confine"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/work"
)

// Outcomes of a turn (Result.Status): the turn's own ending words, and two of Codex's.
const (
	StatusCompleted = string(domain.TurnCompleted)
	StatusFailed    = string(domain.TurnFailed)
	StatusTimeout   = "timeout"
	StatusCanceled  = string(domain.TurnCanceled)
	StatusViolation = "violation" // a read_only workspace changed, or a read_write one was left holding what runs on the owner's side
)

// Defaults for the zero values of Runner's fields.
const (
	DefaultMaxConcurrent = 2
	DefaultTimeout       = 10 * time.Minute
	DefaultGrace         = 5 * time.Second
	DefaultMaxOutput     = 16 << 20
)

const (
	stderrTailBytes  = 8 << 10
	progressInterval = 250 * time.Millisecond
	maxProgressRunes = 200
	maxReasonRunes   = 300
	maxChangedPaths  = 20
)

var (
	// ErrInvalidRequest: the Request is unusable (relative workspace, unknown access mode…).
	ErrInvalidRequest = errors.New("invalid codex request")
	// ErrUnsafeArgs: Runner.ExtraArgs holds an option that is not allowed.
	ErrUnsafeArgs = errors.New("codex option not allowed")
	// ErrNotInstalled: no codex binary at Runner.Path or on PATH, or it is not executable.
	ErrNotInstalled = errors.New("codex is not installed")
	// ErrUnsupportedVersion: codex is older than MinVersion or its version is unreadable.
	ErrUnsupportedVersion = errors.New("unsupported codex version")
	// ErrNotAdmitted: Request.Admit refused the turn; codex did not start.
	ErrNotAdmitted = errors.New("turn not admitted")

	errTurnTimeout = errors.New("turn timeout")
)

// Runner runs `codex exec` turns. The zero value is usable; a node keeps one Runner so that
// MaxConcurrent and the per-workspace lock hold node-wide. Fields must not change after the
// first Run.
type Runner struct {
	Path string // codex binary; default Find's, else "codex" looked up on PATH
	// Find, if set, names the codex binary when Path is empty, asked at every check and turn:
	// the node's is the Codex the owner chose or got in the window ("" = look on PATH); an
	// error (a Codex that is not the one got, X11) refuses the turn with it.
	Find func() (string, error)
	// Upstream, if set, is asked at every check and turn for the model the owner set in the
	// window (never its key: that is the model gateway's, docs/model-gateway.md).
	Upstream func() (Upstream, error)
	// Home is the owner's CODEX_HOME (default $CODEX_HOME, else ~/.codex), read only for
	// codex's sign-in; no turn ever sees it.
	Home string
	// StateDir keeps codex's state per conversation and each turn's scratch; no turn sees
	// another's. The node puts it in its data dir; default a folder under the temp dir.
	StateDir string
	// Sandbox confines every turn; nil = bubblewrap on PATH. Where it cannot, no turn runs.
	Sandbox *confine.Sandbox
	// TestMounts are host folders bound read-write into every turn's view; only test
	// harnesses set them (the fake codex's record).
	TestMounts    []string
	MaxConcurrent int           // turns running at once, node-wide; default 2
	Timeout       time.Duration // per turn, not counting time queued; default 10m
	Grace         time.Duration // SIGINT → SIGKILL, and pipe drain after exit; default 5s
	// ExtraArgs are added before the prompt, e.g. -c model_provider=…; only an allow-list
	// of options is accepted (ErrUnsafeArgs otherwise).
	ExtraArgs []string
	// RequireProvider refuses a turn without a Request.Provider: the node's turns all reach
	// their model through its gateway, so no key of the owner's is ever handed to Codex.
	RequireProvider bool
	// Env adds variables to codex's minimal environment: "NAME=value" sets one, a bare
	// "NAME" copies it from the node's environment when set (e.g. "CODEX_API_KEY").
	Env            []string
	MaxOutputBytes int64            // cap on codex's stdout per turn; default 16 MiB
	Logger         *slog.Logger     // default slog.Default()
	Now            func() time.Time // default time.Now

	mu       sync.Mutex
	sem      chan struct{}
	locks    map[string]*workspaceLock
	versions map[string]versionEntry
	onQueue  func(kind, workspace string) // test hook: a turn starts waiting
	// expire, a test hook, says when a turn's Timeout has passed in place of the clock, so
	// that a test's turn times out on an event (codex is offline, it hangs) however slow the
	// machine is; a nil channel never passes.
	expire   func() <-chan struct{}
	removing sync.WaitGroup // scratch folders of finished turns being removed, the spare being made
	spare    chan string    // a scratch folder made ahead of the next turn (doneWith)
}

// Request is one turn.
type Request struct {
	Workspace  string // absolute path of the brand's workspace
	AccessMode domain.AccessMode
	Prompt     string // sent on stdin; see BuildPrompt
	ThreadID   string // resume this codex thread when set
	Model      string // optional -m
	// Conversation names whose codex state the turn uses (the agent and brand): turns of
	// one conversation can resume each other's threads; no other turn sees them.
	Conversation string
	// Admit, if set, is called once bwrap has started making the turn's view, beside it,
	// and codex starts only once it has returned nil; an error ends the turn there (a grant
	// revoked while it waited, the turn's record not written). The gateway's writes the
	// turn's record, hence not before: a commit beside bwrap's fork slows the fork down
	// (docs/architecture.md, "A turn").
	Admit func(context.Context) error
	// Tidy, if set, holds back the removal of the turn's scratch folder, and the making of the
	// next turn's, until it is closed. The gateway closes it once the turn's receipt is
	// committed: those unlinks and mkdirs go through the same filesystem journal as the
	// commit's fsync, which the answer waits for.
	Tidy <-chan struct{}
	// Provider, if set, is the turn's pass to the node's model gateway: Codex gets its token,
	// never the owner's key (docs/model-gateway.md).
	Provider *Provider
}

// Progress is a short, sanitized status line such as "running: ls".
type Progress struct {
	Text string
}

// Result describes a turn whether or not it succeeded; Status and Reason are always set.
type Result struct {
	Answer            string
	ThreadID          string
	ExitCode          int // -1 when codex did not start or was ended by a signal
	Status            string
	Reason            string       // clear and redacted; empty when completed
	Usage             domain.Usage // Codex's token count for the turn (the model gateway's, when it ran through one)
	OutputTruncated   bool         // stdout went over MaxOutputBytes; codex was stopped
	WorkspaceChanged  bool         // read_only only: the workspace digest changed
	ChangedPaths      []string     // a violation's paths (changed read_only, planted read_write), up to 20, slash-separated
	LeftoverProcesses bool         // processes of codex's group outlived it and were killed
	StderrTail        string       // last few KiB of stderr, redacted
	StartedAt         time.Time
	EndedAt           time.Time
	// Work is what the turn did, for its receipt; nil when codex did not start.
	Work *work.Work
}

type workspaceLock struct {
	ch   chan struct{}
	refs int
}

// Run runs one turn and blocks until codex has ended (its whole process group included).
// A turn on a workspace that is busy waits for it, as does a turn over MaxConcurrent, as long
// as ctx allows. progress, if set, is called from Run's goroutines, at most every 250ms; it
// must not block.
//
// The error is non-nil only when codex was not started (bad request or configuration,
// binary missing or too old, ctx ended while queued); Result.Status and Reason describe the
// outcome either way, so a receipt can always be written.
func (r *Runner) Run(ctx context.Context, req Request, progress func(Progress)) (Result, error) {
	res := Result{ExitCode: -1, StartedAt: r.now()}
	finish := func(status, reason string, err error) (Result, error) {
		res.Status, res.Reason, res.EndedAt = status, reason, r.now()
		return res, err
	}
	bin, box, meta, refused := r.preflight(ctx, req)
	if refused != nil {
		return finish(refused.status, refused.reason, refused.err)
	}
	key, upArgs, why, err := r.route(req)
	if err != nil {
		return finish(StatusFailed, why, err)
	}
	workspace := filepath.Clean(req.Workspace)
	checked, err := os.Stat(workspace) // the folder the caller has just checked (P7)
	if err != nil {
		return finish(StatusFailed, "workspace: "+err.Error(), fmt.Errorf("%w: %v", ErrInvalidRequest, err))
	}
	release, err := r.acquire(ctx, workspace)
	if err != nil {
		return finish(queueEnded(err))
	}
	defer release()
	// The wait may have been long: the view binds the folder opened now, after the wait,
	// if it is still the one checked (W25).
	ws, err := openWorkspace(workspace, checked)
	if err != nil {
		return finish(StatusFailed, "workspace: "+err.Error(), fmt.Errorf("%w: %v", ErrInvalidRequest, err))
	}
	defer ws.Close()

	res.StartedAt = r.now()
	dirs, err := r.prepareTurn(req.Conversation)
	if err != nil {
		return finish(StatusFailed, "cannot prepare the turn's private folders", err)
	}
	defer r.doneWith(dirs, req.Tidy)
	outFile := filepath.Join(dirs.tmp, "last-message.txt")
	args, err := buildArgs(Request{Workspace: workspace, AccessMode: req.AccessMode, ThreadID: req.ThreadID, Model: req.Model},
		filepath.Join(viewTmp, "last-message.txt"), append(slices.Clone(r.ExtraArgs), upArgs...))
	if err != nil {
		return finish(StatusFailed, "invalid request: "+err.Error(), fmt.Errorf("%w: %v", ErrInvalidRequest, err))
	}
	view := r.turnView(bin, workspace, req.AccessMode == domain.ReadWrite, dirs)
	view.InfoFD, view.BlockFD = sandboxInfoFD, sandboxBlockFD
	wrapper, wrapped, err := box.Wrap(view, append([]string{bin}, args...))
	if err != nil {
		return finish(StatusFailed, "Confinement: "+err.Error(), err)
	}
	env := r.environ(key)
	red := newRedactor(append(r.extraEnv(), "CODEX_API_KEY="+key))
	gate := progressGate{fn: progress, now: r.now, red: red}
	t := &turn{req: req, workspace: workspace, root: descriptorPath(ws), guard: workspaceGuard{access: req.AccessMode},
		red: red, outFile: outFile, timeout: r.timeout(), meta: meta}
	t.tr.work = newWorkLog(workspace, r.now)

	tctx, cancel := r.turnContext(ctx, t.timeout)
	defer cancel()
	c := command{bin: wrapper, args: wrapped, env: env, dir: workspace, prompt: req.Prompt, workspace: ws}
	out := r.runProcess(tctx, c, t.hold(ctx, r.now), func(line []byte) {
		gate.emit(t.tr.handle(line))
	})
	if out.heldBy != nil {
		return finish(StatusFailed, t.heldFor, out.heldBy)
	}
	r.conclude(t, out, &res)
	return res, nil
}

// turnContext ends with errTurnTimeout once timeout has passed (or r.expire says so).
func (r *Runner) turnContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if r.expire == nil {
		return context.WithTimeoutCause(ctx, timeout, errTurnTimeout)
	}
	tctx, cancel := context.WithCancelCause(ctx)
	expired := r.expire()
	go func() {
		select {
		case <-expired:
			cancel(errTurnTimeout)
		case <-tctx.Done():
		}
	}()
	return tctx, func() { cancel(context.Canceled) }
}

// refusal is why a turn ends before its view is made: its Result's Status and Reason, and
// Run's error.
type refusal struct {
	status, reason string
	err            error
}

// preflight checks what a turn needs before it queues: a sound request and ExtraArgs, a
// codex binary recent enough, and a sandbox that confines. It also says what will run the
// turn, for its receipt.
func (r *Runner) preflight(ctx context.Context, req Request) (string, *confine.Sandbox, work.Work, *refusal) {
	refuse := func(reason string, err error) (string, *confine.Sandbox, work.Work, *refusal) {
		return "", nil, work.Work{}, &refusal{StatusFailed, reason, err}
	}
	if err := checkRequest(req); err != nil {
		return refuse("invalid request: "+err.Error(), fmt.Errorf("%w: %v", ErrInvalidRequest, err))
	}
	if err := checkExtraArgs(r.ExtraArgs); err != nil {
		return refuse("codex is misconfigured: "+err.Error(), err)
	}
	bin, err := r.binary()
	if err != nil {
		return refuse(err.Error(), err)
	}
	version, err := r.checkVersion(ctx, bin)
	if err != nil {
		return refuse(err.Error(), err)
	}
	box := r.sandbox()
	st := box.Check(ctx)
	if !st.Available {
		return refuse(st.Text(), fmt.Errorf("%w: %s", confine.ErrUnavailable, st.Reason))
	}
	return bin, box, workMeta(version, req, r.modelFor(req), st), nil
}

// modelFor is the upstream and model a turn's receipt names: through the node's model
// gateway, the server it forwards to and the model the pass asks for (docs/model-gateway.md).
func (r *Runner) modelFor(req Request) Upstream {
	up, err := r.upstream()
	if err != nil {
		up = Upstream{}
	}
	if req.Provider != nil && req.Provider.Model != "" {
		up.Model = req.Provider.Model
	}
	return up
}

// queueEnded is the status, reason and error of a turn whose wait for its workspace or a
// slot ended with err.
func queueEnded(err error) (string, string, error) {
	if errors.Is(err, context.DeadlineExceeded) {
		return StatusTimeout, "timed out waiting for another turn to finish", err
	}
	return StatusCanceled, "canceled while waiting for another turn to finish", err
}

// turn is one Run's state from the making of its view to its Result.
type turn struct {
	req       Request
	workspace string
	root      string // the workspace the view binds, as the host reads it (descriptorPath)
	guard     workspaceGuard
	heldFor   string // why hold did not let codex start, for the Result
	tr        transcript
	red       redactor
	outFile   string // codex's last message, as the host sees it
	timeout   time.Duration
	meta      work.Work // what ran the turn, for its receipt
}

// hold is runProcess's hold: bwrap makes the view while the workspace is looked at
// (workspaceGuard) and Admit answers; codex starts once both are done (T8, W13), or never.
func (t *turn) hold(ctx context.Context, now func() time.Time) func() error {
	return func() error {
		admitted := make(chan error, 1)
		if t.req.Admit == nil {
			admitted <- nil
		} else {
			go func() { admitted <- t.req.Admit(ctx) }()
		}
		if err := t.guard.before(t.root, now()); err != nil {
			t.heldFor = "workspace: " + err.Error()
			return fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
		if err := <-admitted; err != nil {
			t.heldFor = err.Error()
			return fmt.Errorf("%w: %w", ErrNotAdmitted, err)
		}
		return nil
	}
}

// conclude fills in res from how codex ended and what it said, and from the workspace as
// the turn left it; only a completed turn keeps its answer.
func (r *Runner) conclude(t *turn, out procOutcome, res *Result) {
	tr := &t.tr
	res.ThreadID = tr.threadID
	if res.ThreadID == "" {
		res.ThreadID = t.req.ThreadID
	}
	res.Usage = tr.usage
	res.Answer = tr.answer
	res.StderrTail = t.red.redact(cleanLines(out.stderr))
	res.LeftoverProcesses = out.leftovers
	if out.state != nil {
		if res.ExitCode = out.state.ExitCode(); res.ExitCode > 128 {
			res.ExitCode = -1 // bwrap's 128+n: codex was ended by signal n
		}
	}
	if res.Answer == "" && out.state != nil && out.state.Success() {
		res.Answer = readCapped(t.outFile, r.maxOutput())
	}
	status, reason := r.judge(out, tr, *res, t.timeout)
	res.OutputTruncated = errors.Is(out.stoppedBy, errOutputCap)

	if out.startErr == nil { // else the workspace was not looked at before
		files := t.guard.changes(t.root)
		if why := r.guardAfter(&t.guard, t.root, res); why != "" {
			status, reason = StatusViolation, why
		}
		res.Work = tr.work.finish(t.meta, files)
	}
	if status != StatusCompleted {
		res.Answer = "" // never hand out a partial or unvetted answer
	}
	res.Status, res.Reason, res.EndedAt = status, oneLine(t.red.redact(reason), maxReasonRunes), r.now()
	r.logger().Info("codex turn", "status", res.Status, "reason", res.Reason, "exit_code", res.ExitCode,
		"thread_id", res.ThreadID, "workspace", t.workspace, "access", t.req.AccessMode,
		"duration", res.EndedAt.Sub(res.StartedAt), "events", tr.events, "skipped_lines", tr.skipped,
		"leftovers", res.LeftoverProcesses)
}

// judge maps how codex ended to a status and a reason (S4, S5).
func (r *Runner) judge(out procOutcome, tr *transcript, res Result, timeout time.Duration) (string, string) {
	switch {
	case out.startErr != nil:
		return StatusFailed, "codex could not be started: " + out.startErr.Error()
	case errors.Is(out.stoppedBy, errOutputCap):
		return StatusFailed, fmt.Sprintf("codex's output went over %s and was stopped", sizeText(r.maxOutput()))
	case errors.Is(out.stoppedBy, errTurnTimeout), errors.Is(out.stoppedBy, context.DeadlineExceeded):
		after := "after " + shortDuration(timeout)
		if !errors.Is(out.stoppedBy, errTurnTimeout) {
			after = "at the request's deadline"
		}
		if tr.networkRetry {
			return StatusTimeout, "offline or timed out " + after
		}
		return StatusTimeout, "timed out " + after
	case out.stoppedBy != nil:
		return StatusCanceled, "canceled"
	case tr.turnFailed:
		msg := tr.failMessage
		if msg == "" {
			msg = tr.lastError
		}
		if msg == "" {
			msg = "codex reported a failed turn"
		}
		return StatusFailed, explain(msg)
	}
	if sig, ok := exitSignal(out.state); ok {
		return StatusFailed, fmt.Sprintf("codex crashed (signal %d)", sig)
	}
	if out.state != nil {
		if sig := out.state.ExitCode() - 128; sig > 0 && sig < 65 {
			// bwrap passes a signal that ended codex on as exit status 128+n.
			return StatusFailed, fmt.Sprintf("codex crashed (signal %d)", sig)
		}
	}
	if res.ExitCode != 0 {
		msg := lastErrorLine(out.stderr)
		if msg == "" {
			msg = tr.lastError
		}
		reason := fmt.Sprintf("codex exited with code %d", res.ExitCode)
		if msg != "" {
			reason = explain(msg) + " (" + reason + ")"
		}
		return StatusFailed, reason
	}
	if !tr.turnCompleted {
		return StatusFailed, "codex exited without completing the turn"
	}
	if strings.TrimSpace(res.Answer) == "" {
		return StatusFailed, "codex finished without an answer"
	}
	return StatusCompleted, ""
}

// explain turns codex's failure texts into what a user can act on.
func explain(msg string) string {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "401 unauthorized"), strings.Contains(m, "not logged in"),
		strings.Contains(m, "invalid_api_key"), strings.Contains(m, "incorrect api key"):
		return "the model refused the key (set another on the Status page): " + msg
	case strings.Contains(m, "quota exceeded"), strings.Contains(m, "insufficient_quota"),
		strings.Contains(m, "usage limit"):
		return "quota exceeded"
	case strings.Contains(m, "model") && strings.Contains(m, "does not exist"):
		return "model not available: " + msg
	case strings.Contains(m, "not inside a trusted directory"):
		return "codex does not trust the workspace: " + msg
	case strings.Contains(m, "no rollout found"):
		return "the codex thread to resume was not found"
	case strings.Contains(m, "no prompt provided"):
		return "codex received no prompt"
	case strings.HasPrefix(m, "bwrap:"):
		return "Confinement: the sandbox could not be set up (" + msg + ")"
	}
	return msg
}

// lastErrorLine picks codex's "Error: …" line from stderr, else its last line.
func lastErrorLine(stderr string) string {
	lines := strings.Split(strings.TrimSpace(cleanLines(stderr)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "Error:") || strings.HasPrefix(l, "error:") {
			return l
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

func checkRequest(req Request) error {
	if req.Workspace == "" || !filepath.IsAbs(req.Workspace) {
		return fmt.Errorf("workspace %q is not an absolute path", req.Workspace)
	}
	if _, err := sandboxFor(req.AccessMode); err != nil {
		return err
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return errors.New("empty prompt")
	}
	if req.ThreadID != "" && !threadIDPattern.MatchString(req.ThreadID) {
		return fmt.Errorf("bad thread id %q", req.ThreadID)
	}
	if req.Model != "" {
		if err := checkModel(req.Model); err != nil {
			return err
		}
	}
	st, err := os.Stat(req.Workspace)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("workspace %q is not a directory", req.Workspace)
	}
	return nil
}

// binary finds codex: Runner.Path (a name is looked up on PATH), else Find's, else "codex" on PATH.
func (r *Runner) binary() (string, error) {
	name := r.Path
	if name == "" && r.Find != nil {
		var err error
		if name, err = r.Find(); err != nil {
			return "", err
		}
	}
	if name == "" {
		name = "codex"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%w (no %q found)", ErrNotInstalled, name)
		}
		return "", fmt.Errorf("%w: %s is not executable: %v", ErrNotInstalled, name, err)
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	return nativeBinary(bin), nil
}

// acquire takes the workspace's lock, then a node-wide slot (S11), waiting as long as ctx
// allows. The workspace comes first so that a turn queued behind its own workspace does not
// hold a slot that another workspace could use.
func (r *Runner) acquire(ctx context.Context, workspace string) (func(), error) {
	r.mu.Lock()
	if r.sem == nil {
		r.sem = make(chan struct{}, r.maxConcurrent())
		r.locks = map[string]*workspaceLock{}
	}
	l := r.locks[workspace]
	if l == nil {
		l = &workspaceLock{ch: make(chan struct{}, 1)}
		r.locks[workspace] = l
	}
	l.refs++
	hook := r.onQueue
	r.mu.Unlock()
	unref := func() {
		r.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(r.locks, workspace)
		}
		r.mu.Unlock()
	}
	if err := take(ctx, l.ch, hook, "workspace", workspace); err != nil {
		unref()
		return nil, err
	}
	if err := take(ctx, r.sem, hook, "slot", workspace); err != nil {
		<-l.ch
		unref()
		return nil, err
	}
	return func() {
		<-r.sem
		<-l.ch
		unref()
	}, nil
}

func take(ctx context.Context, ch chan struct{}, hook func(string, string), kind, workspace string) error {
	select {
	case ch <- struct{}{}:
		return nil
	default:
	}
	if hook != nil {
		hook(kind, workspace)
	}
	select {
	case ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// environ is a turn's whole environment, as codex sees it inside the view: a system PATH,
// HOME, TMPDIR and CODEX_HOME in the view, LANG, the credential and the variables named in
// Runner.Env; nothing else of the node's (W6).
func (r *Runner) environ(key string) []string {
	env := newEnvList()
	env.set("PATH", viewPath)
	env.set("HOME", viewHome)
	env.set("TMPDIR", viewTmp)
	if v, ok := os.LookupEnv("LANG"); ok {
		env.set("LANG", v)
	}
	env.set("CODEX_HOME", viewCodexHome)
	for _, kv := range r.extraEnv() {
		if k, v, _ := strings.Cut(kv, "="); k != "CODEX_API_KEY" {
			env.set(k, v)
		}
	}
	// The credential's key, and no other: a key meant for OpenAI never goes to a server the
	// owner named in the window (X10).
	if key != "" {
		env.set("CODEX_API_KEY", key)
	}
	return env.list()
}

// checkEnviron is the environment of the start-up checks (`codex --version`, `codex login
// status`), which run on the host: they read the owner's CODEX_HOME and no agent input.
func (r *Runner) checkEnviron(home string) []string {
	env := newEnvList()
	env.set("PATH", os.Getenv("PATH"))
	env.set("HOME", home)
	if runtime.GOOS == "windows" {
		env.set("USERPROFILE", home)
		for _, k := range []string{"SystemRoot", "ComSpec", "PATHEXT", "TEMP", "TMP"} {
			if v, ok := os.LookupEnv(k); ok {
				env.set(k, v)
			}
		}
	}
	if v, ok := os.LookupEnv("LANG"); ok {
		env.set("LANG", v)
	}
	if h := r.codexHome(); h != "" {
		env.set("CODEX_HOME", h)
	}
	for _, kv := range r.extraEnv() {
		k, v, _ := strings.Cut(kv, "=")
		env.set(k, v)
	}
	return env.list()
}

func (r *Runner) sandbox() *confine.Sandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Sandbox == nil {
		root, _ := r.stateDir()
		r.Sandbox = &confine.Sandbox{Mark: filepath.Join(root, "turns", "t-probe")} // RemoveLeftovers finds it
	}
	return r.Sandbox
}

// extraEnv resolves Runner.Env to NAME=value pairs.
func (r *Runner) extraEnv() []string {
	var out []string
	for _, e := range r.Env {
		if strings.Contains(e, "=") {
			out = append(out, e)
		} else if v, ok := os.LookupEnv(e); ok {
			out = append(out, e+"="+v)
		}
	}
	return out
}

func (r *Runner) codexHome() string {
	if r.Home != "" {
		return r.Home
	}
	if h := os.Getenv("CODEX_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".codex")
	}
	return ""
}

type envList struct {
	keys []string
	vals map[string]string
}

func newEnvList() *envList { return &envList{vals: map[string]string{}} }

func (e *envList) set(k, v string) {
	if _, ok := e.vals[k]; !ok {
		e.keys = append(e.keys, k)
	}
	e.vals[k] = v
}

func (e *envList) list() []string {
	out := make([]string, 0, len(e.keys))
	for _, k := range e.keys {
		out = append(out, k+"="+e.vals[k])
	}
	return out
}

// progressGate sanitizes progress lines and drops those that come too fast.
type progressGate struct {
	fn   func(Progress)
	now  func() time.Time
	red  redactor
	last time.Time
}

func (g *progressGate) emit(text string) {
	if g.fn == nil || text == "" {
		return
	}
	t := g.now()
	if !g.last.IsZero() && t.Sub(g.last) < progressInterval {
		return
	}
	g.last = t
	// Clean, then redact, then cut (S10): a character cleaned away after the redactor ran would
	// join a secret around it, and a cut before it could leave part of one. A text is one line
	// of codex's capped output, so this stays linear in that output.
	if text = oneLine(g.red.redact(oneLine(text, len(text))), maxProgressRunes); text != "" {
		g.fn(Progress{Text: text})
	}
}

func readCapped(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, max))
	return string(b)
}

// sizeText prints 16 MiB or 512 KiB.
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// shortDuration prints 10m rather than 10m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

func (r *Runner) maxConcurrent() int {
	if r.MaxConcurrent > 0 {
		return r.MaxConcurrent
	}
	return DefaultMaxConcurrent
}

func (r *Runner) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}

func (r *Runner) grace() time.Duration {
	if r.Grace > 0 {
		return r.Grace
	}
	return DefaultGrace
}

func (r *Runner) maxOutput() int64 {
	if r.MaxOutputBytes > 0 {
		return r.MaxOutputBytes
	}
	return DefaultMaxOutput
}
