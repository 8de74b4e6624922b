package codex

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/domain"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// fixtureKey is the API key every fixture hands codex.
const fixtureKey = "CODEX_API_KEY=test-key-fixture"

// fixture is a Runner on the fake codex with a workspace and a record file.
type fixture struct {
	r      *Runner
	ws     string
	record string
}

func newFixture(t *testing.T, env ...string) *fixture {
	t.Helper()
	fake := codextest.BuildFake(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	records := filepath.Join(dir, "records") // the only host folder the confined fake may write
	if err := os.Mkdir(records, 0o700); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(records, "record.jsonl")
	f := &fixture{
		r: &Runner{
			Path:       fake,
			Home:       filepath.Join(dir, "codex-home"),
			StateDir:   filepath.Join(dir, "state"),
			TestMounts: codextest.Mounts(append([]string{"FAKE_CODEX_RECORD=" + record}, env...)),
			Timeout:    2 * time.Minute,
			Grace:      500 * time.Millisecond,
			Env:        append([]string{"FAKE_CODEX_RECORD=" + record, fixtureKey}, env...),
			Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		},
		ws:     ws,
		record: record,
	}
	t.Cleanup(f.r.Wait) // the spare scratch, before the temp dir goes
	return f
}

// req is a read_only request whose prompt picks the fake's scenario.
func (f *fixture) req(scenario string) Request {
	return Request{Workspace: f.ws, AccessMode: domain.ReadOnly, Prompt: "[fake:" + scenario + "] hello"}
}

func (f *fixture) run(t *testing.T, req Request) Result {
	t.Helper()
	res, err := f.r.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func (f *fixture) records(t *testing.T) []codextest.Record {
	t.Helper()
	return codextest.ReadRecords(t, f.record)
}

// waitUntil polls cond until it holds. It has no deadline of its own: what it waits for
// happens on any machine, however slow, and a hang is go test's -timeout to report, with
// every goroutine's stack.
func waitUntil(cond func() bool) {
	for !cond() {
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRecord waits until n records with the given phase exist.
func (f *fixture) waitRecord(t *testing.T, phase string, n int) []codextest.Record {
	t.Helper()
	for {
		var got []codextest.Record
		for _, r := range f.records(t) {
			if r.Phase == phase {
				got = append(got, r)
			}
		}
		if len(got) >= n {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func wantStatus(t *testing.T, res Result, status, reason string) {
	t.Helper()
	if res.Status != status || !strings.Contains(res.Reason, reason) {
		t.Fatalf("status %q reason %q; want %q with %q (stderr %q)", res.Status, res.Reason, status, reason, res.StderrTail)
	}
}

// Codex starts only once Admit lets it: bwrap makes the view meanwhile, but codex has not run
// in it, and a refusal ends the view with nothing of the turn left running (T8, W13).
func TestAdmitHoldsCodex(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		f := newFixture(t)
		let := make(chan error)
		req := f.req(codextest.ScenarioOK)
		req.Admit = func(context.Context) error { return <-let }
		type ran struct {
			res Result
			err error
		}
		done := make(chan ran, 1)
		go func() {
			res, err := f.r.Run(context.Background(), req, nil)
			done <- ran{res, err}
		}()
		// bwrap has started while Admit holds the turn
		waitUntil(func() bool { return len(codextest.Processes(f.record)) > 0 })
		time.Sleep(300 * time.Millisecond) // every chance for codex to start early
		if recs := f.records(t); len(recs) != 0 {
			t.Fatalf("codex ran before Admit let it: %+v", recs)
		}
		if !refuse {
			let <- nil
			if r := <-done; r.err != nil || r.res.Status != StatusCompleted || len(f.records(t)) == 0 {
				t.Fatalf("admitted: %v %+v", r.err, r.res)
			}
			continue
		}
		let <- errors.New("the owner revoked the grant")
		r := <-done
		if !errors.Is(r.err, ErrNotAdmitted) || r.res.Status != StatusFailed || r.res.Reason != "the owner revoked the grant" {
			t.Fatalf("refused: %v %+v", r.err, r.res)
		}
		if recs := f.records(t); len(recs) != 0 {
			t.Fatalf("codex ran in a turn Admit refused: %+v", recs)
		}
		if left := codextest.Processes(f.record); len(left) != 0 {
			t.Fatalf("processes of a refused turn outlived it: %v", left)
		}
	}
}

func TestRunCompletes(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, f.req(codextest.ScenarioOK))
	wantStatus(t, res, StatusCompleted, "")
	if res.Answer != codextest.DefaultAnswer || res.ExitCode != 0 || res.ThreadID == "" {
		t.Fatalf("answer %q exit %d thread %q", res.Answer, res.ExitCode, res.ThreadID)
	}
	want := domain.Usage{InputTokens: 120, CachedInputTokens: 20, OutputTokens: 7}
	if diff := cmp.Diff(want, res.Usage); diff != "" {
		t.Fatalf("usage (-want +got):\n%s", diff)
	}
	if res.WorkspaceChanged || res.OutputTruncated || res.LeftoverProcesses || res.EndedAt.Before(res.StartedAt) {
		t.Fatalf("unexpected result %+v", res)
	}
}

func TestInvocation(t *testing.T) {
	f := newFixture(t)
	f.r.ExtraArgs = []string{"-c", "model_reasoning_effort=low", "--ephemeral"}
	first := f.run(t, f.req(codextest.ScenarioOK))
	wantStatus(t, first, StatusCompleted, "")
	rec := f.records(t)[0]
	want := []string{f.r.Path, "exec", "--json", "--color", "never", "--sandbox", "read-only",
		"--cd", f.ws, "--skip-git-repo-check", "-c", `shell_environment_policy.inherit="core"`,
		"-c", "project_doc_max_bytes=0", "-c", "project_doc_fallback_filenames=[]", "-c", "skills.include_instructions=false", "-o", rec.OutputFile,
		"-c", "model_reasoning_effort=low", "--ephemeral", "--", "-"}
	if diff := cmp.Diff(want, rec.Argv); diff != "" {
		t.Fatalf("argv (-want +got):\n%s", diff)
	}
	if rec.Sandbox != "read-only" || rec.Cd != f.ws || rec.Cwd != f.ws || !rec.JSON || !rec.SkipGitCheck {
		t.Fatalf("record %+v", rec)
	}
	if rec.OutputFile == "" || strings.HasPrefix(rec.OutputFile, f.ws) {
		t.Fatalf("-o %q must be a private file outside the workspace", rec.OutputFile)
	}

	t.Run("read_write resume with model", func(t *testing.T) {
		f.r.ExtraArgs = nil
		firstRes := f.run(t, f.req(codextest.ScenarioOK)) // a thread that is kept
		req := f.req(codextest.ScenarioOK)
		req.AccessMode, req.ThreadID, req.Model = domain.ReadWrite, firstRes.ThreadID, "gpt-test"
		res := f.run(t, req)
		wantStatus(t, res, StatusCompleted, "")
		recs := f.records(t)
		rec := recs[len(recs)-1]
		want := []string{f.r.Path, "exec", "--json", "--color", "never", "--sandbox", "workspace-write",
			"--cd", f.ws, "--skip-git-repo-check", "-c", `shell_environment_policy.inherit="core"`,
			"-c", "project_doc_max_bytes=0", "-c", "project_doc_fallback_filenames=[]", "-c", "skills.include_instructions=false", "-m", "gpt-test", "-o", rec.OutputFile,
			"resume", "--", firstRes.ThreadID, "-"}
		if diff := cmp.Diff(want, rec.Argv); diff != "" {
			t.Fatalf("argv (-want +got):\n%s", diff)
		}
		if !rec.Resume || res.ThreadID != firstRes.ThreadID || rec.Sandbox != "workspace-write" {
			t.Fatalf("resume: record %+v result thread %q", rec, res.ThreadID)
		}
	})

	t.Run("unknown thread", func(t *testing.T) {
		req := f.req(codextest.ScenarioOK)
		req.ThreadID = "00000000-0000-0000-0000-000000000000"
		wantStatus(t, f.run(t, req), StatusFailed, "the codex thread to resume was not found")
	})
}

// Turns whose timeout the test decides on an event, never on the clock: a loaded machine
// starts codex late, and a turn must not time out before it did what the test is about.

// expireNever: the fixture's turns never time out.
func (f *fixture) expireNever() { f.r.expire = func() <-chan struct{} { return nil } }

// expireOnStart: the fixture's next turn times out once the fake has started (its "start"
// record), with whatever it does at start (ignoring SIGTERM) done.
func (f *fixture) expireOnStart(t *testing.T) {
	starts := len(f.waitRecord(t, "start", 0))
	started := make(chan struct{})
	f.r.expire = func() <-chan struct{} { return started }
	go func() {
		f.waitRecord(t, "start", starts+1)
		close(started)
	}()
}

// expireWhenOffline: r's next turn times out once codex has said it is waiting for the
// network; the returned func is that turn's progress, where it says so.
func expireWhenOffline(r *Runner) func(Progress) {
	offline := make(chan struct{})
	var once sync.Once
	r.expire = func() <-chan struct{} { return offline }
	return func(p Progress) {
		if isNetworkRetry(p.Text) {
			once.Do(func() { close(offline) })
		}
	}
}

func TestFailureReasons(t *testing.T) {
	f := newFixture(t)
	f.r.Timeout = 300 * time.Millisecond // what the reasons say; the turns time out on events
	f.expireNever()
	for _, tc := range []struct {
		scenario, status, reason string
		exit                     int
	}{
		{codextest.Scenario401, StatusFailed, "the model refused the key (set another on the Status page): unexpected status 401 Unauthorized: Incorrect API key provided: sk-proj-********************abcd., url: https://api.openai.com/v1/responses", 1},
		{codextest.ScenarioQuota, StatusFailed, "quota exceeded", 1},
		{codextest.ScenarioModel, StatusFailed, "model not available: The requested model 'gpt-nope' does not exist.", 1},
		{codextest.ScenarioOffline, StatusTimeout, "offline or timed out after 300ms", -1},
		{codextest.ScenarioHang, StatusTimeout, "timed out after 300ms", -1},
		{codextest.ScenarioCrash, StatusFailed, "codex crashed (signal 9)", -1},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			var progress func(Progress)
			switch tc.scenario {
			case codextest.ScenarioOffline:
				progress = expireWhenOffline(f.r)
			case codextest.ScenarioHang:
				f.expireOnStart(t)
			}
			defer f.expireNever()
			res, err := f.r.Run(context.Background(), f.req(tc.scenario), progress)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			wantStatus(t, res, tc.status, tc.reason)
			if res.ExitCode != tc.exit || res.Answer != "" {
				t.Fatalf("exit %d answer %q", res.ExitCode, res.Answer)
			}
		})
	}

	t.Run("garbage lines and unknown events", func(t *testing.T) {
		res := f.run(t, f.req(codextest.ScenarioGarbage))
		wantStatus(t, res, StatusCompleted, "")
		if res.Answer != codextest.DefaultAnswer {
			t.Fatalf("answer %q", res.Answer)
		}
	})
	t.Run("stderr flood before the first line", func(t *testing.T) {
		res := f.run(t, f.req(codextest.ScenarioStderrFlood))
		wantStatus(t, res, StatusCompleted, "")
		if len(res.StderrTail) > stderrTailBytes || !strings.Contains(res.StderrTail, "warning: flood") {
			t.Fatalf("stderr tail of %d bytes: %.80q", len(res.StderrTail), res.StderrTail)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan Result)
		f.r.Timeout = time.Minute
		starts := len(f.waitRecord(t, "start", 0))
		go func() {
			res, _ := f.r.Run(ctx, f.req(codextest.ScenarioHang), nil)
			done <- res
		}()
		f.waitRecord(t, "start", starts+1)
		cancel()
		res := <-done
		wantStatus(t, res, StatusCanceled, "canceled")
		assertGone(t, f.record)
	})
}

func TestProgress(t *testing.T) {
	f := newFixture(t)
	clock := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	f.r.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}
	var got []string
	_, err := f.r.Run(context.Background(), f.req(codextest.ScenarioTools), func(p Progress) {
		got = append(got, p.Text)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"running: ls", "editing: notes.md", "tool: docs/search"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("progress (-want +got):\n%s", diff)
	}

	t.Run("rate limited", func(t *testing.T) {
		var n int
		g := progressGate{fn: func(Progress) { n++ }, now: func() time.Time { return clock }}
		for range 100 {
			g.emit("running: ls")
		}
		if n != 1 {
			t.Fatalf("%d progress calls within one interval", n)
		}
	})
}

func TestHuge(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, f.req(codextest.ScenarioHuge))
	wantStatus(t, res, StatusCompleted, "")
	if len(res.Answer) != 8<<20 {
		t.Fatalf("answer of %d bytes", len(res.Answer))
	}
}

func TestCheck(t *testing.T) {
	apiKeyLogin := `{"auth_mode":"apikey","OPENAI_API_KEY":"sk-owner-login-key"}`
	chatgpt := `{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token":"x","access_token":"y","refresh_token":"z"}}`
	envKey := Credential{Kind: CredentialAPIKeyEnv, Summary: "API key from CODEX_API_KEY: the node's model gateway holds it; each turn's Codex gets a one-time token"}
	for _, tc := range []struct {
		name string
		env  []string
		auth string // the owner's auth.json
		want Health
	}{
		{"api key in the environment", []string{"CODEX_API_KEY=dummy-key"}, "",
			Health{Found: true, Version: TestedVersion, VersionOK: true, APIKey: true, Credential: envKey}},
		{"api key login", []string{"FAKE_CODEX_LOGGED_IN=1"}, apiKeyLogin,
			Health{Found: true, Version: TestedVersion, VersionOK: true, LoggedIn: true, Credential: Credential{Kind: CredentialAPIKeyLogin,
				Summary: "API key from `codex login --with-api-key`: the node's model gateway holds it; each turn's Codex gets a one-time token"}}},
		{"W8 ChatGPT sign-in cannot be protected", []string{"FAKE_CODEX_LOGGED_IN=1"}, chatgpt,
			Health{Found: true, Version: TestedVersion, VersionOK: true, LoggedIn: true,
				Credential: Credential{Kind: CredentialChatGPT, Summary: "ChatGPT sign-in (cannot be protected)",
					Problem: "codex is signed in with a ChatGPT account, whose tokens the commands Codex runs could read; " + safeCredentialHint},
				Error: "codex is signed in with a ChatGPT account, whose tokens the commands Codex runs could read; " + safeCredentialHint}},
		{"signed in outside auth.json", []string{"FAKE_CODEX_LOGGED_IN=1"}, "",
			Health{Found: true, Version: TestedVersion, VersionOK: true, LoggedIn: true,
				Credential: Credential{Kind: CredentialUnreadable, Summary: "signed in outside auth.json (cannot be handed over)",
					Problem: "codex keeps its sign-in outside HOME/auth.json (e.g. in the system keyring), where Aether cannot give it to codex alone; " + safeCredentialHint},
				Error: "codex keeps its sign-in outside HOME/auth.json (e.g. in the system keyring), where Aether cannot give it to codex alone; " + safeCredentialHint}},
		{"not logged in", nil, "",
			Health{Found: true, Version: TestedVersion, VersionOK: true,
				Credential: Credential{Kind: CredentialNone, Summary: "not signed in", Problem: "codex is not signed in: " + safeCredentialHint},
				Error:      "codex is not signed in: " + safeCredentialHint}},
		{"newer than tested", []string{"CODEX_API_KEY=dummy-key", "FAKE_CODEX_VERSION=0.180.2"}, "",
			Health{Found: true, Version: "0.180.2", VersionOK: true, APIKey: true, Credential: envKey,
				Warning: "codex 0.180.2 is newer than the last version tested (" + TestedVersion + ")"}},
		{"too old", []string{"CODEX_API_KEY=dummy-key", "FAKE_CODEX_VERSION=0.168.9"}, "",
			Health{Found: true, Version: "0.168.9", APIKey: true, Credential: envKey, Error: "codex 0.168.9 is too old: 0.169.0 or newer is needed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.env...)
			f.r.Env = slices.DeleteFunc(f.r.Env, func(kv string) bool { return kv == fixtureKey })
			f.r.Home = codextest.Home(t)
			if tc.auth != "" {
				mustWrite(t, filepath.Join(f.r.Home, "auth.json"), tc.auth)
			}
			h := f.r.Check(context.Background())
			if !h.Confinement.Available {
				t.Fatalf("confinement: %s", h.Confinement.Text())
			}
			tc.want.Path = f.r.Path
			fix := strings.NewReplacer("HOME/", f.r.Home+"/")
			tc.want.Credential.Problem, tc.want.Error = fix.Replace(tc.want.Credential.Problem), fix.Replace(tc.want.Error)
			if diff := cmp.Diff(tc.want, h, cmpopts.IgnoreFields(Health{}, "Confinement")); diff != "" {
				t.Fatalf("health (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInvalidRequests(t *testing.T) {
	f := newFixture(t)
	for name, mutate := range map[string]func(*Request){
		"relative workspace": func(r *Request) { r.Workspace = "ws" },
		"missing workspace":  func(r *Request) { r.Workspace = filepath.Join(f.ws, "nope") },
		"unknown access":     func(r *Request) { r.AccessMode = "readonly" },
		"empty prompt":       func(r *Request) { r.Prompt = " \n" },
		"dash thread id":     func(r *Request) { r.ThreadID = "--last" },
		"dash model":         func(r *Request) { r.Model = "-c" },
	} {
		t.Run(name, func(t *testing.T) {
			req := f.req(codextest.ScenarioOK)
			mutate(&req)
			res, err := f.r.Run(context.Background(), req, nil)
			if !errors.Is(err, ErrInvalidRequest) || res.Status != StatusFailed || res.Reason == "" {
				t.Fatalf("err %v result %+v", err, res)
			}
		})
	}
	if recs := f.records(t); len(recs) != 0 {
		t.Fatalf("codex ran for an invalid request: %+v", recs)
	}
	t.Run("unsafe extra args", func(t *testing.T) {
		f.r.ExtraArgs = []string{"--add-dir", "/"}
		res, err := f.r.Run(context.Background(), f.req(codextest.ScenarioOK), nil)
		if !errors.Is(err, ErrUnsafeArgs) || res.Status != StatusFailed {
			t.Fatalf("err %v result %+v", err, res)
		}
	})
}

// TestSecurityRows covers the S rows of docs/threats.md (S8 is the admin API's).
func TestSecurityRows(t *testing.T) {
	t.Run("S1 hang killed at the deadline", func(t *testing.T) {
		f := newFixture(t)
		f.r.Timeout = 300 * time.Millisecond
		f.expireOnStart(t)
		res := f.run(t, f.req(codextest.ScenarioHang))
		wantStatus(t, res, StatusTimeout, "timed out after 300ms")
		assertGone(t, f.record)
	})
	t.Run("S1 ignores SIGINT and SIGTERM, killed after the grace period", func(t *testing.T) {
		f := newFixture(t)
		f.r.Timeout, f.r.Grace = 300*time.Millisecond, 300*time.Millisecond
		f.expireOnStart(t)
		res := f.run(t, f.req(codextest.ScenarioIgnoreTerm))
		wantStatus(t, res, StatusTimeout, "timed out")
		assertGone(t, f.record)
	})
	t.Run("S2 grandchild holding the pipes is killed", func(t *testing.T) {
		f := newFixture(t)
		res := f.run(t, f.req(codextest.ScenarioGrandchild))
		wantStatus(t, res, StatusCompleted, "")
		if rec := f.records(t)[0]; rec.GrandchildPID == 0 {
			t.Fatal("fake did not record its grandchild")
		}
		assertGone(t, f.record) // the sandbox's PID namespace ends with codex, the grandchild with it
	})
	t.Run("S3 endless stdout is capped", func(t *testing.T) {
		f := newFixture(t)
		f.r.MaxOutputBytes = 4 << 20
		res := f.run(t, f.req(codextest.ScenarioFlood))
		wantStatus(t, res, StatusFailed, "output went over 4 MiB")
		if !res.OutputTruncated {
			t.Fatal("OutputTruncated not set")
		}
		assertGone(t, f.record)
	})
	t.Run("S3 one line longer than the cap", func(t *testing.T) {
		f := newFixture(t, "FAKE_CODEX_ANSWER_BYTES=3000000")
		f.r.MaxOutputBytes = 1 << 20
		res := f.run(t, f.req(codextest.ScenarioHuge))
		wantStatus(t, res, StatusFailed, "output went over 1 MiB")
		if !res.OutputTruncated || res.Answer != "" {
			t.Fatalf("truncated %v answer of %d bytes", res.OutputTruncated, len(res.Answer))
		}
	})
	t.Run("S4 non-zero exit with a redacted stderr tail", func(t *testing.T) {
		f := newFixture(t)
		res := f.run(t, f.req(codextest.ScenarioFail))
		wantStatus(t, res, StatusFailed, "Error: backend exploded; api_key=[redacted] (codex exited with code 3)")
		if res.ExitCode != 3 {
			t.Fatalf("exit code %d", res.ExitCode)
		}
		for _, secret := range []string{"SECRETSECRET", "sk-live-0123456789"} {
			if strings.Contains(res.StderrTail, secret) || strings.Contains(res.Reason, secret) {
				t.Fatalf("secret %q leaked: %q / %q", secret, res.StderrTail, res.Reason)
			}
		}
	})
	t.Run("S4 turn.failed", func(t *testing.T) {
		f := newFixture(t)
		res := f.run(t, f.req(codextest.ScenarioQuota))
		wantStatus(t, res, StatusFailed, "quota exceeded")
	})
	t.Run("S5 exit 0 without an answer", func(t *testing.T) {
		f := newFixture(t)
		wantStatus(t, f.run(t, f.req(codextest.ScenarioEmpty)), StatusFailed, "codex finished without an answer")
	})
	t.Run("S5 exit 0 without turn.completed", func(t *testing.T) {
		f := newFixture(t)
		res := f.run(t, f.req(codextest.ScenarioNoComplete))
		wantStatus(t, res, StatusFailed, "codex exited without completing the turn")
		if res.Answer != "" {
			t.Fatalf("answer %q handed out for a failed turn", res.Answer)
		}
	})
	t.Run("S6 write in a read-only workspace", func(t *testing.T) {
		// Even codex itself cannot write: the view mounts the workspace read-only (W2).
		f := newFixture(t)
		res := f.run(t, f.req(codextest.ScenarioWrite))
		wantStatus(t, res, StatusCompleted, "")
		if _, err := os.Stat(filepath.Join(f.ws, "pwned.txt")); !os.IsNotExist(err) || res.WorkspaceChanged {
			t.Fatalf("the read-only workspace was written: %v %+v", err, res)
		}
		if rec := f.records(t)[0]; rec.Sandbox != "read-only" || rec.Cd != f.ws {
			t.Fatalf("codex ran with sandbox %q cd %q", rec.Sandbox, rec.Cd)
		}
	})
	t.Run("S6 read-only workspace changed during the turn with size and mtime put back", func(t *testing.T) {
		// From outside the view (the view cannot write): a rewrite that keeps the size and
		// restores the mtime. A file settled before the turn is fingerprinted by its metadata,
		// so its ctime catches it; a racy one is also hashed.
		for _, settled := range []bool{true, false} {
			gate := openGateOnCleanup(t)
			f := newFixture(t, "FAKE_CODEX_GATE="+gate)
			if settled {
				f.r.Now = func() time.Time { return time.Now().Add(time.Hour) }
			}
			results := make(chan Result, 1)
			go func() {
				res, _ := f.r.Run(context.Background(), f.req(codextest.ScenarioGate), nil)
				results <- res
			}()
			f.waitRecord(t, "start", 1)
			a := filepath.Join(f.ws, "a.txt")
			st, err := os.Stat(a)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(a, []byte("ho\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(a, st.ModTime(), st.ModTime()); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			res := <-results
			wantStatus(t, res, StatusViolation, "the read-only workspace changed during the turn (1 paths, e.g. a.txt)")
			if !res.WorkspaceChanged || !slices.Equal(res.ChangedPaths, []string{"a.txt"}) || res.Answer != "" {
				t.Fatalf("settled %v: result %+v", settled, res)
			}
		}
	})
	t.Run("S6 read_write workspace may change", func(t *testing.T) {
		f := newFixture(t)
		req := f.req(codextest.ScenarioWrite)
		req.AccessMode = domain.ReadWrite
		res := f.run(t, req)
		wantStatus(t, res, StatusCompleted, "")
		if res.WorkspaceChanged || f.records(t)[0].Sandbox != "workspace-write" {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("S7 minimal environment", func(t *testing.T) {
		t.Setenv("AETHER_NODE_SECRET", "do-not-pass")
		t.Setenv("CODEX_API_KEY", "key-from-node-env")
		f := newFixture(t, "CODEX_API_KEY")
		wantStatus(t, f.run(t, f.req(codextest.ScenarioOK)), StatusCompleted, "")
		rec := f.records(t)[0]
		env := map[string]string{}
		for _, kv := range rec.Env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		realHome, _ := os.UserHomeDir()
		if env["HOME"] == "" || env["HOME"] == realHome || strings.HasPrefix(env["HOME"], f.ws) {
			t.Fatalf("HOME %q is not a private directory", env["HOME"])
		}
		if env["CODEX_HOME"] != viewCodexHome || env["CODEX_API_KEY"] != "key-from-node-env" {
			t.Fatalf("CODEX_HOME %q CODEX_API_KEY %q", env["CODEX_HOME"], env["CODEX_API_KEY"])
		}
		allowed := []string{"PATH", "HOME", "TMPDIR", "LANG", "CODEX_HOME", "CODEX_API_KEY", "FAKE_CODEX_RECORD", "PWD"} // bwrap sets PWD on --chdir
		for k := range env {
			if !slices.Contains(allowed, k) {
				t.Errorf("codex got %s from the node's environment", k)
			}
		}
	})
	t.Run("S9 prompt starting with dashes stays on stdin", func(t *testing.T) {
		f := newFixture(t)
		prompt := "--dangerously-bypass-approvals-and-sandbox -a never [fake:ok]\n--add-dir /"
		res := f.run(t, Request{Workspace: f.ws, AccessMode: domain.ReadOnly, Prompt: prompt})
		wantStatus(t, res, StatusCompleted, "")
		rec := f.records(t)[0]
		if rec.Prompt != prompt {
			t.Fatalf("prompt %q", rec.Prompt)
		}
		for _, a := range rec.Argv {
			if strings.Contains(a, "dangerously") || a == "-a" || a == "--add-dir" {
				t.Fatalf("prompt leaked into argv %q", rec.Argv)
			}
		}
		if rec.Argv[len(rec.Argv)-2] != "--" || rec.Argv[len(rec.Argv)-1] != "-" {
			t.Fatalf("argv does not end with -- -: %q", rec.Argv)
		}
	})
	t.Run("S10 control and bidi characters never reach progress", func(t *testing.T) {
		var got []string
		g := progressGate{fn: func(p Progress) { got = append(got, p.Text) }, now: time.Now}
		g.emit("running: \x1b[31mrm\x1b[0m -rf\u202e\x07 /\n" + strings.Repeat("x", 1000))
		if len(got) != 1 || strings.ContainsAny(got[0], "\x1b\u202e\x07\n") || len([]rune(got[0])) > maxProgressRunes+1 {
			t.Fatalf("progress %q", got)
		}
		if !strings.HasPrefix(got[0], "running: rm -rf /") {
			t.Fatalf("progress %q", got[0])
		}
	})
	t.Run("S11 second turn on a workspace waits", func(t *testing.T) {
		testWorkspaceLock(t)
	})
	t.Run("S11 queued turn honours its context", func(t *testing.T) {
		testQueueCancel(t)
	})
	t.Run("S12 binary missing", func(t *testing.T) {
		f := newFixture(t)
		f.r.Path = filepath.Join(t.TempDir(), "codex")
		res, err := f.r.Run(context.Background(), f.req(codextest.ScenarioOK), nil)
		if !errors.Is(err, ErrNotInstalled) {
			t.Fatalf("err %v", err)
		}
		wantStatus(t, res, StatusFailed, "codex is not installed")
		if h := f.r.Check(context.Background()); h.Found || !strings.Contains(h.Error, "codex is not installed") {
			t.Fatalf("health %+v", h)
		}
	})
	t.Run("S12 binary missing from PATH", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		r := &Runner{}
		h := r.Check(context.Background())
		if h.Found || h.Error != `codex is not installed (no "codex" found)` {
			t.Fatalf("health %+v", h)
		}
	})
	t.Run("S12 not executable", func(t *testing.T) {
		f := newFixture(t)
		f.r.Path = filepath.Join(t.TempDir(), "codex")
		if err := os.WriteFile(f.r.Path, []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := f.r.Run(context.Background(), f.req(codextest.ScenarioOK), nil)
		if !errors.Is(err, ErrNotInstalled) {
			t.Fatalf("err %v", err)
		}
		wantStatus(t, res, StatusFailed, "not executable")
	})
	t.Run("S12 wrong version", func(t *testing.T) {
		f := newFixture(t, "FAKE_CODEX_VERSION=0.150.0")
		res, err := f.r.Run(context.Background(), f.req(codextest.ScenarioOK), nil)
		if !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("err %v", err)
		}
		wantStatus(t, res, StatusFailed, "codex 0.150.0 is too old: 0.169.0 or newer is needed")
		if len(f.records(t)) != 0 {
			t.Fatal("an unsupported codex ran a turn")
		}
	})
}

// testWorkspaceLock: turn B on A's workspace starts only after A ended, while turn C on
// another workspace runs meanwhile.
func testWorkspaceLock(t *testing.T) {
	gate := openGateOnCleanup(t)
	f := newFixture(t, "FAKE_CODEX_GATE="+gate)
	queued := make(chan string, 4)
	f.r.onQueue = func(kind, _ string) { queued <- kind }
	results := make(chan Result, 2)
	runAsync := func(req Request) {
		go func() {
			res, _ := f.r.Run(context.Background(), req, nil)
			results <- res
		}()
	}
	a := f.req(codextest.ScenarioGate)
	a.Prompt += " A"
	runAsync(a)
	f.waitRecord(t, "start", 1)

	b := f.req(codextest.ScenarioOK)
	b.Prompt += " B"
	runAsync(b)
	if kind := <-queued; kind != "workspace" {
		t.Fatalf("B queued for %q", kind)
	}

	other := t.TempDir()
	c := Request{Workspace: other, AccessMode: domain.ReadOnly, Prompt: "[fake:ok] C"}
	wantStatus(t, f.run(t, c), StatusCompleted, "")

	for _, r := range f.records(t) {
		if strings.HasSuffix(r.Prompt, " B") {
			t.Fatal("B started while A held the workspace")
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		wantStatus(t, <-results, StatusCompleted, "")
	}
	var order []string
	for _, r := range f.records(t) {
		if !strings.HasSuffix(r.Prompt, " C") {
			order = append(order, r.Phase+" "+r.Prompt[len(r.Prompt)-1:])
		}
	}
	if diff := cmp.Diff([]string{"start A", "end A", "start B", "end B"}, order); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
}

// testQueueCancel: a turn waiting for a workspace, or for a node-wide slot, gives up when
// its context ends and never starts codex.
func testQueueCancel(t *testing.T) {
	gate := openGateOnCleanup(t)
	f := newFixture(t, "FAKE_CODEX_GATE="+gate)
	f.r.MaxConcurrent = 1
	queued := make(chan string, 4)
	f.r.onQueue = func(kind, _ string) { queued <- kind }
	done := make(chan Result, 1)
	go func() {
		res, _ := f.r.Run(context.Background(), f.req(codextest.ScenarioGate), nil)
		done <- res
	}()
	f.waitRecord(t, "start", 1)

	for _, tc := range []struct{ kind, workspace string }{{"workspace", f.ws}, {"slot", t.TempDir()}} {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		var res Result
		go func() {
			var err error
			res, err = f.r.Run(ctx, Request{Workspace: tc.workspace, AccessMode: domain.ReadOnly, Prompt: "[fake:ok] queued"}, nil)
			errc <- err
		}()
		if kind := <-queued; kind != tc.kind {
			t.Fatalf("queued for %q, want %q", kind, tc.kind)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: err %v", tc.kind, err)
		}
		wantStatus(t, res, StatusCanceled, "canceled while waiting")
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, <-done, StatusCompleted, "")
	for _, r := range f.records(t) {
		if strings.HasSuffix(r.Prompt, "queued") {
			t.Fatal("a canceled queued turn started codex")
		}
	}
	if len(f.r.locks) != 0 {
		t.Fatalf("workspace locks left behind: %v", f.r.locks)
	}
}

// openGateOnCleanup returns the path of a gate file and opens the gate when the test ends,
// so that a failed test leaves no fake codex waiting.
func openGateOnCleanup(t *testing.T) string {
	gate := filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	return gate
}

// A turn's scratch is gone once the runner has finished with it, and the scratch a crash
// left behind goes at the next start.
func TestScratchRemoved(t *testing.T) {
	f := newFixture(t)
	if res := f.run(t, f.req("ok")); res.Status != StatusCompleted {
		t.Fatalf("turn: %+v", res)
	}
	f.r.Wait()
	turns := filepath.Join(f.r.StateDir, "turns")
	if left, _ := filepath.Glob(filepath.Join(turns, "*")); len(left) != 0 {
		t.Fatalf("scratch left after the turn: %q", left)
	}
	crashed := filepath.Join(turns, "t-123", "tmp")
	if err := os.MkdirAll(crashed, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashed, "secret"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.RemoveLeftovers(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(turns, "*")); len(left) != 0 {
		t.Fatalf("scratch a crash left behind is still there: %q", left)
	}
}

// With Request.Tidy, a finished turn's scratch stays until Tidy is closed (the gateway, once
// the turn's receipt is committed), and then goes.
func TestScratchTidiedWhenTold(t *testing.T) {
	f := newFixture(t)
	answered := func() []string { // the turns' scratch folders that codex wrote in
		left, _ := filepath.Glob(filepath.Join(f.r.StateDir, "turns", "t-*", "tmp", "last-message.txt"))
		return left
	}
	tidy := make(chan struct{})
	req := f.req("ok")
	req.Tidy = tidy
	if res := f.run(t, req); res.Status != StatusCompleted {
		t.Fatalf("turn: %+v", res)
	}
	held := answered()
	if len(held) != 1 {
		t.Fatalf("the turn's scratch went before Tidy was closed: %q", held)
	}
	// Another turn, tidied at once, is removed while the first one's scratch stays.
	if res := f.run(t, f.req("ok")); res.Status != StatusCompleted {
		t.Fatalf("second turn: %+v", res)
	}
	for left := answered(); len(left) != 1 || left[0] != held[0]; left = answered() {
		if !slices.Contains(left, held[0]) {
			t.Fatalf("the turn's scratch went before Tidy was closed: %q", left)
		}
		runtime.Gosched()
	}
	close(tidy)
	f.r.Wait()
	if left, _ := filepath.Glob(filepath.Join(f.r.StateDir, "turns", "*")); len(left) != 0 {
		t.Fatalf("scratch left once tidied: %q", left)
	}
}

// TestBusyReaderKeepsTheTurn: when codex exits while its reader is still busy with one event,
// for longer than the grace period, the reader still reads the events already in the pipe:
// the turn completes. The grace period bounds a wait for more, not the reader's own work.
func TestBusyReaderKeepsTheTurn(t *testing.T) {
	gate := openGateOnCleanup(t)
	f := newFixture(t, "FAKE_CODEX_GATE="+gate)
	var once sync.Once
	res, err := f.r.Run(context.Background(), f.req(codextest.ScenarioLate), func(Progress) {
		once.Do(func() {
			// Codex writes its last events, after what this reader has read, and exits
			// while the reader is still here.
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Error(err)
			}
			time.Sleep(3 * f.r.Grace)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, StatusCompleted, "")
}

// TestDrainPipe: whatever holds a pipe open after codex exited cannot hold the turn: a read
// that has waited the grace period for more is ended, and what came before it was read.
func TestDrainPipe(t *testing.T) {
	t.Run("S2 a writer that outlives codex cannot hold the drain", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close() // held open, as by a writer the kill missed
		d := &drainPipe{f: r}
		defer d.Close()
		done, read := make(chan struct{}), make(chan struct{})
		var lines []string
		go func() {
			defer close(done)
			_ = readLines(d, 1<<20, func(l []byte) { lines = append(lines, string(l)); close(read) })
		}()
		if _, err := w.Write([]byte("{\"type\":\"turn.completed\"}\n")); err != nil {
			t.Fatal(err)
		}
		<-read // codex has exited: from here on the reader waits for more
		drained := make(chan struct{})
		go func() { d.drain(done, 50*time.Millisecond); close(drained) }()
		select {
		case <-drained:
		case <-time.After(time.Minute):
			t.Fatal("the drain waited on a pipe that stays open")
		}
		if len(lines) != 1 {
			t.Fatalf("read %q before the drain ended; want the one line written", lines)
		}
	})
}
