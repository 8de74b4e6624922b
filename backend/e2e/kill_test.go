//go:build linux

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/datadir"
	"github.com/aether/aether/backend/identity/identitytest"
	"github.com/aether/aether/backend/receipts"
)

// buildAether builds the headless aether binary from the module root.
func buildAether(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "aether")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/aether/aether")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build aether: %v\n%s", err, out)
	}
	return bin
}

// served is `aether node serve` running as a subprocess on an env's files.
type served struct {
	e    *env
	bin  string
	fake string
	log  string
	cmd  *exec.Cmd
	done chan error
}

// newServedEnv prepares an env (policy, workspace, issuer) for a node that
// runs as a subprocess; e.n stays nil.
func newServedEnv(t *testing.T) *served {
	root := t.TempDir()
	e := &env{t: t, dataDir: filepath.Join(root, "data"), policy: filepath.Join(root, "policy.json"),
		workspace: filepath.Join(root, "workspace"), record: filepath.Join(root, "codex-record.jsonl")}
	if err := os.MkdirAll(e.workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(e.workspace, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	e.publicURL = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	pol := fmt.Sprintf(`{"pact":{"publicUrl":%q,"audience":%q,"allowInsecureLocalIssuers":true,"brands":%s}}`, e.publicURL, e.publicURL, reviewBrand)
	if err := os.WriteFile(e.policy, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	e.issuer = identitytest.NewIssuer(t)
	s := &served{e: e, bin: buildAether(t), fake: codextest.BuildFake(t), log: filepath.Join(root, "node.log")}
	t.Cleanup(func() {
		if s.cmd != nil {
			s.cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			data, _ := os.ReadFile(s.log)
			t.Logf("node log:\n%s", data)
		}
	})
	return s
}

// serve starts the node and waits until it has recorded its addresses and
// the gateway answers.
func (s *served) serve() {
	s.e.t.Helper()
	s.spawn()
	s.ready()
}

// spawn starts `aether node serve` without waiting for it.
func (s *served) spawn() {
	t := s.e.t
	t.Helper()
	logf, err := os.OpenFile(s.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, "node", "serve", "--policy", s.e.policy, "--data-dir", s.e.dataDir, "--port", "0", "--admin-port", "0",
		"--pact-listen", strings.TrimPrefix(s.e.publicURL, "http://"), "--codex", s.fake)
	// The fake Codex keeps its sessions under CODEX_HOME: keep them in the test's folder.
	cmd.Env = append(os.Environ(), "CODEX_HOME="+filepath.Join(filepath.Dir(s.e.dataDir), "codex-home"), s.codexMarker(), "CODEX_API_KEY=kill9-test-key")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start aether: %v", err)
	}
	s.cmd, s.done = cmd, make(chan error, 1)
	go func() { s.done <- cmd.Wait() }()
}

// ready waits until the node has recorded its addresses and the gateway answers.
func (s *served) ready() {
	t := s.e.t
	t.Helper()
	cmd := s.cmd
	deadline := time.Now().Add(waitLimit)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("aether node serve was not ready within %s", waitLimit)
		}
		select {
		case err := <-s.done:
			s.cmd = nil
			t.Fatalf("aether node serve exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		var addrs datadir.Addresses
		data, err := os.ReadFile(filepath.Join(s.e.dataDir, "node.json"))
		if err != nil || json.Unmarshal(data, &addrs) != nil || addrs.PID != cmd.Process.Pid {
			continue // not written yet, or a killed node's leftover
		}
		resp, err := http.Get(s.e.publicURL + "/healthz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			continue
		}
		token, err := os.ReadFile(filepath.Join(s.e.dataDir, "admin.token"))
		if err != nil {
			t.Fatalf("admin token: %v", err)
		}
		s.e.admin = adminClientAt(t, addrs.Admin, strings.TrimSpace(string(token)))
		return
	}
}

// kill9 kills the node with SIGKILL: no shutdown code runs.
func (s *served) kill9() {
	s.e.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.e.t.Fatalf("kill -9: %v", err)
	}
	<-s.done
	s.cmd = nil
}

// stop stops the node with SIGTERM and wants a clean exit.
func (s *served) stop() {
	t := s.e.t
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.cmd = nil
		if err != nil {
			t.Fatalf("aether node serve on SIGTERM: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("aether node serve did not stop within %s of SIGTERM", waitLimit)
	}
}

// codexMarker is in the environment of every process of the node's turns (bwrap, codex and
// what the fake codex starts): the node's AETHER_TURN_TAG, unique to the test.
func (s *served) codexMarker() string {
	// The whole data dir path: test processes running side by side have dirs of the same
	// base name (".../001"), and one must not count the other's codex as its own.
	sum := sha256.Sum256([]byte(s.e.dataDir))
	return "AETHER_TURN_TAG=kill9-" + hex.EncodeToString(sum[:8])
}

// waitCodex waits until the fake codex itself runs inside its turn's view (not just bwrap
// setting the view up), as a turn in the middle of its work.
func (s *served) waitCodex() {
	t := s.e.t
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for _, pid := range codextest.Processes(s.codexMarker()) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if strings.HasPrefix(string(cmdline), s.fake+"\x00exec\x00") {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the node started no codex within %s", waitLimit)
}

var verifiedCount = regexp.MustCompile(`OK: (\d+) receipt`)

// verifyReceipts runs `aether receipts verify --data-dir D` and returns how
// many receipts it verified.
func (s *served) verifyReceipts() int {
	t := s.e.t
	t.Helper()
	out, err := exec.Command(s.bin, "receipts", "verify", "--data-dir", s.e.dataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("aether receipts verify: %v\n%s", err, out)
	}
	m := verifiedCount.FindSubmatch(out)
	if m == nil {
		t.Fatalf("aether receipts verify said: %s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestKill9 kills `aether node serve` with SIGKILL right after start, while
// idle and in the middle of a turn; each time the next start opens the data
// dir with every grant, task and receipt, and the receipt chain verifies.
func TestKill9(t *testing.T) {
	t.Parallel()
	s := newServedEnv(t)
	e := s.e
	ctx := context.Background()

	t.Run("kill -9 during start-up", func(t *testing.T) {
		for range 3 {
			s.spawn()
			s.kill9()
		}
		s.serve()
	})
	t.Run("kill -9 right after start", func(t *testing.T) {
		s.kill9()
		s.serve()
	})

	alice := e.agent("alice")
	grant := alice.allow()
	c := alice.client("review", a2a.TransportProtocolJSONRPC)
	done := alice.send(c, "", "Review main.go please")
	if done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("turn ended %s: %q", done.Status.State, statusText(done))
	}
	bob := e.agent("bob")
	cb := bob.client("review", a2a.TransportProtocolJSONRPC)
	waiting := bob.send(cb, "", "Review main.go please")

	t.Run("kill -9 while idle loses nothing", func(t *testing.T) {
		s.kill9()
		s.serve()
		if g := e.grant(grant); g == nil || g["status"] != "active" {
			t.Errorf("grant after kill -9: %v", g)
		}
		if r := e.receiptFor(done.ID); r == nil || r["status"] != "completed" {
			t.Errorf("receipt after kill -9: %v", r)
		}
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: done.ID})
		if err != nil || got.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("completed task after kill -9: %v %v", got, err)
		}
		if claims := receiptClaims(t, e, got); claims.Status != "completed" {
			t.Errorf("receipt status %s", claims.Status)
		}
		if w, err := cb.GetTask(ctx, &a2a.GetTaskRequest{ID: waiting.ID}); err != nil || w.Status.State != a2a.TaskStateAuthRequired {
			t.Errorf("waiting task after kill -9: %v %v", w, err)
		}
		if again := alice.send(c, "", "Review main.go again"); again.Status.State != a2a.TaskStateCompleted {
			t.Errorf("the delegation token after kill -9: turn ended %s: %q", again.Status.State, statusText(again))
		}
	})

	t.Run("T8 kill -9 during a running turn", func(t *testing.T) {
		before := s.verifyReceipts()
		sctx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		task, _, stop := startStream(t, sctx, c, "crash under me [fake:hang]")
		defer stop()
		s.waitCodex()
		s.kill9()
		stop()
		// The kernel kills codex with its node (parent-death signal): no turn
		// outlives the node that was running it.
		deadline := time.Now().Add(waitLimit)
		for !processGone(s.codexMarker()) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !processGone(s.codexMarker()) {
			t.Errorf("codex outlived the killed node: %v", codextest.Processes(s.codexMarker()))
			killProcess(s.codexMarker())
		}

		if n := s.verifyReceipts(); n != before {
			t.Errorf("after kill -9 the data dir verifies %d receipts, want the %d from before", n, before)
		}
		s.serve()
		got := waitState(t, c, task.ID, a2a.TaskStateFailed)
		if !strings.Contains(statusText(got), "stopped") {
			t.Errorf("the interrupted task's reason %q does not say the node stopped", statusText(got))
		}
		r := e.receiptFor(task.ID)
		if r == nil || r["status"] != "failed" {
			t.Fatalf("the interrupted turn's receipt: %v", r)
		}
		var detail struct {
			Claims receipts.Claims
			Verify struct{ OK bool }
		}
		if code := e.admin.do("GET", "/api/receipts/"+r["id"].(string), nil, &detail); code != 200 || !detail.Verify.OK ||
			detail.Claims.Reason != receipts.ReasonNodeStopped {
			t.Errorf("the interrupted turn's receipt: %d %+v, want the reason %q", code, detail, receipts.ReasonNodeStopped)
		}
		s.stop()
		if n := s.verifyReceipts(); n != before+1 {
			t.Errorf("after the restart %d receipts verify, want %d", n, before+1)
		}
	})
}

// TestCancelDuringSetup cancels turns while bubblewrap is still making their views (0 to 9 ms
// after the turn starts): stopped then, bwrap used to die before the view armed its
// parent-death signal, and the view ran on under init, Codex and all, with the node up.
func TestCancelDuringSetup(t *testing.T) {
	t.Parallel()
	s := newServedEnv(t)
	s.serve()
	defer s.stop()
	alice := s.e.agent("alice")
	alice.allow()
	c := alice.client("review", a2a.TransportProtocolJSONRPC)
	t.Run("W18 turns canceled while their view is set up leave nothing running", func(t *testing.T) {
		for i := range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			task, next, stop := startStream(t, ctx, c, fmt.Sprintf("hang %d [fake:hang]", i))
			time.Sleep(time.Duration(i%4) * 3 * time.Millisecond)
			got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
			if err != nil || got.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("cancel: %v %v", got, err)
			}
			// Also when CancelTask follows the stream's first event at once: the turn is
			// running by then, and its receipt comes with the answer.
			if claims := receiptClaims(t, s.e, got); claims.Status != "canceled" {
				t.Fatalf("the receipt of turn %d says %s, want canceled", i, claims.Status)
			}
			for _, err, ok := next(); ok && err == nil; _, err, ok = next() {
			}
			stop()
			cancel()
		}
		// Every turn has its receipt (CancelTask answers after it), so every view has been
		// told to end; give the kernel the moment it takes to end them.
		left := func() (pids []int) {
			for _, pid := range codextest.Processes(s.codexMarker()) {
				if pid != s.cmd.Process.Pid {
					pids = append(pids, pid)
				}
			}
			return pids
		}
		for deadline := time.Now().Add(waitLimit); len(left()) > 0 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if pids := left(); len(pids) > 0 {
			t.Errorf("processes of canceled turns still run beside the node: %v", pids)
		}
	})
}
