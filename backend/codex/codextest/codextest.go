// Package codextest builds the fake codex (backend/codex/testdata/fakecodex) for tests of
// this package and of the packages that run turns through it.
//
// The fake is driven by environment variables, which reach it through codex.Runner.Env:
//
//	FAKE_CODEX_SCENARIO   one of the Scenario* constants (default ok); a prompt containing
//	                      "[fake:NAME]" picks scenario NAME for that turn instead
//	FAKE_CODEX_RECORD     file to which every run appends Record lines (JSON)
//	FAKE_CODEX_ANSWER     the answer of the ok scenarios (default "Hello from fake codex")
//	FAKE_CODEX_ANSWER_BYTES size of the huge answer (default 8 MiB)
//	FAKE_CODEX_STDERR_BYTES size of the stderr flood (default 32 MiB)
//	FAKE_CODEX_GATE       file the gate scenario waits for before answering (or for its
//	                      directory to be removed)
//	FAKE_CODEX_VERSION    what --version reports (default the pinned codexget.Version)
//	FAKE_CODEX_LOGGED_IN  "1": `login status` exits 0, else 1 with "Not logged in"
package codextest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// goTool builds the fake: found when the test binary starts, before a test narrows PATH to
// hide every codex (t.Setenv("PATH", "/usr/bin:/bin")), where go is not.
var goTool = func() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}()

// Scenarios of the fake codex.
const (
	ScenarioOK          = "ok"           // one answer
	ScenarioTools       = "tools"        // command, file change, MCP call, two messages
	Scenario401         = "401"          // retries, then turn.failed "unexpected status 401 Unauthorized…"
	ScenarioQuota       = "quota"        // turn.failed "Quota exceeded…"
	ScenarioModel       = "model"        // turn.failed "The requested model … does not exist."
	ScenarioOffline     = "offline"      // "Reconnecting... waiting for network" forever
	ScenarioHang        = "hang"         // starts a turn, then nothing
	ScenarioCrash       = "crash"        // half a line, then SIGKILL itself
	ScenarioGarbage     = "garbage"      // garbage lines and unknown events around an answer
	ScenarioHuge        = "huge"         // an answer of FAKE_CODEX_ANSWER_BYTES
	ScenarioFlood       = "flood"        // endless stdout
	ScenarioStderrFlood = "stderr-flood" // FAKE_CODEX_STDERR_BYTES on stderr first, then ok
	ScenarioIgnoreTerm  = "ignore-term"  // ignores SIGINT and SIGTERM, then hangs
	ScenarioGrandchild  = "grandchild"   // leaves a child holding stdout, answers, exits 0
	ScenarioWrite       = "write"        // writes pwned.txt into the workspace, answers
	ScenarioEmpty       = "empty"        // exit 0, turn.completed, no answer
	ScenarioNoComplete  = "no-complete"  // an answer but no turn.completed, exit 0
	ScenarioFail        = "fail"         // stderr "Error: …" with a secret, exit 3
	ScenarioGate        = "gate"         // waits for FAKE_CODEX_GATE, then answers
	ScenarioLate        = "late"         // starts a command, waits for FAKE_CODEX_GATE, then answers
)

// DefaultAnswer is the ok scenarios' answer when FAKE_CODEX_ANSWER is not set.
const DefaultAnswer = "Hello from fake codex"

// Record is one line of FAKE_CODEX_RECORD. A run appends a "start" line after its start-up
// checks (before the scenario) and an "end" line when it exits by itself.
type Record struct {
	Phase         string   `json:"phase"`
	PID           int      `json:"pid"`
	Argv          []string `json:"argv"`
	Cwd           string   `json:"cwd"`
	Cd            string   `json:"cd"`
	Sandbox       string   `json:"sandbox"`
	Model         string   `json:"model"`
	OutputFile    string   `json:"output_file"`
	JSON          bool     `json:"json"`
	SkipGitCheck  bool     `json:"skip_git_repo_check"`
	Resume        bool     `json:"resume"`
	ThreadID      string   `json:"thread_id"`
	Config        []string `json:"config"`
	Prompt        string   `json:"prompt"`
	Env           []string `json:"env"`
	Scenario      string   `json:"scenario"`
	GrandchildPID int      `json:"grandchild_pid,omitempty"`
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildOut  []byte
)

// BuildFake builds the fake codex once per test binary and returns its path. The binary is
// kept in the user's cache directory under a hash of its checkout and sources, so test runs reuse it
// instead of leaving a new copy behind each time.
func BuildFake(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { buildPath, buildOut, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("build fake codex: %v\n%s", buildErr, buildOut)
	}
	return buildPath
}

func build() (string, []byte, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", nil, errors.New("cannot locate the fake codex sources")
	}
	here := filepath.Dir(file)
	src := filepath.Join(here, "..", "testdata", "fakecodex")
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, dir := range []string{src, here, filepath.Join(here, "..", "..", "codexget")} { // the fake's version is the pin
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			return "", nil, err
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return "", nil, err
			}
			fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
			h.Write(data)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	// One folder per checkout: another clone's tests (other sources, run at the same time)
	// never remove the build this one runs.
	checkout := sha256.Sum256([]byte(src))
	dir := filepath.Join(cache, "aether-fakecodex-builds", hex.EncodeToString(checkout[:])[:12], hex.EncodeToString(h.Sum(nil))[:16])
	name := "codex"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	bin := filepath.Join(dir, name)
	if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() {
		return bin, nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	// Build under a temporary name and rename, so concurrent test binaries never run a
	// half-written file.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(goTool, "build", "-o", filepath.Join(tmp, name), ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", out, err
	}
	if err := os.Rename(filepath.Join(tmp, name), bin); err != nil {
		return "", nil, err
	}
	// Builds of this checkout's older sources are never used again.
	if old, err := filepath.Glob(filepath.Join(filepath.Dir(dir), "*")); err == nil {
		for _, o := range old {
			if o != dir {
				os.RemoveAll(o)
			}
		}
	}
	return bin, nil, nil
}

// ReadRecords returns the records appended to path so far (none if it does not exist).
// It may run while fakes are still appending.
func ReadRecords(t testing.TB, path string) []Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("read fake codex record: %v", err)
	}
	// A run may be appending right now: leave out a last line that is not finished.
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var recs []Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("fake codex record line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// AppendRecord is used by the fake itself: one JSON line, appended in a single write so that
// concurrent runs do not interleave.
func AppendRecord(path string, r Record) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Home is a fresh CODEX_HOME outside /tmp, removed after the test: under /tmp
// the real codex's Linux sandbox cannot start its commands, and a checkout (or
// t.TempDir()) may well be under /tmp.
func Home(t testing.TB) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil || base == "/tmp" || strings.HasPrefix(base, "/tmp/") {
		base = "/var/tmp"
	}
	dir := filepath.Join(base, "aether-test")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	home, err := os.MkdirTemp(dir, "codex-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	return home
}

// Mounts are the folders of the files named by FAKE_CODEX_RECORD and FAKE_CODEX_GATE in
// env: a confined turn sees nothing else of the host, so a harness binds these into its view
// (codex.Runner.TestMounts). Each should be a folder of its own.
func Mounts(env []string) []string {
	var dirs []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if (k == "FAKE_CODEX_RECORD" || k == "FAKE_CODEX_GATE") && v != "" && !slices.Contains(dirs, filepath.Dir(v)) {
			dirs = append(dirs, filepath.Dir(v))
		}
	}
	return dirs
}
