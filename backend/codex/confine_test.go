package codex

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codex/mockmodel"
	"github.com/aether/aether/backend/confine"
	"github.com/aether/aether/backend/domain"
)

// These tests attack the view a turn runs in (docs/confinement.md, W1–W9) with the real
// codex, driven by a mock model that runs whatever an agent might ask for. They assert on
// the tool output codex sends back to the model: what the model sees, an agent can have.
// TestConfinementAsOwner runs them again as an unprivileged user, as owners run the node.

// host is a realistic machine around a brand's workspace: the node's data dir, the policy,
// the owner's codex sign-in, another brand's workspace, a sibling folder and a file in the
// owner's home, each holding a secret no turn may read.
type host struct {
	dir, ws, data, policy, other, sibling, ownerCodex, homeFile string
	secrets                                                     map[string]string // what → secret text
	envKey                                                      string            // the API key codex is given
	wsText                                                      string            // what the workspace's a.txt says
}

func secret(what string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(what) + "-SECRET-" + hex.EncodeToString(b[:])
}

func newHost(t *testing.T) *host {
	t.Helper()
	dir := t.TempDir()
	h := &host{dir: dir, ws: filepath.Join(dir, "ws"), data: filepath.Join(dir, "data"), policy: filepath.Join(dir, "policy.json"),
		other: filepath.Join(dir, "other-ws"), sibling: filepath.Join(dir, "sibling"), ownerCodex: codextest.Home(t),
		secrets: map[string]string{}, envKey: secret("apikey"), wsText: secret("workspace")}
	put := func(what, path string) {
		h.secrets[what] = secret(what)
		mustWrite(t, path, h.secrets[what]+"\n")
	}
	for _, f := range []string{"node.key", "admin.token", "admin-tls.key", "receipts.head", "pact.sqlite"} {
		put(f, filepath.Join(h.data, f))
	}
	put("policy", h.policy)
	put("other brand", filepath.Join(h.other, "secret.txt"))
	put("sibling", filepath.Join(h.sibling, "secret.txt"))
	h.secrets["owner login"] = secret("login")
	mustWrite(t, filepath.Join(h.ownerCodex, "auth.json"), `{"auth_mode":"apikey","OPENAI_API_KEY":"`+h.secrets["owner login"]+`"}`)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	h.homeFile = filepath.Join(home, ".aether-confine-test-"+hex.EncodeToString([]byte(filepath.Base(dir))))
	put("owner home", h.homeFile)
	t.Cleanup(func() { os.Remove(h.homeFile) })
	// A process of the owner's: its environment must stay out of reach too.
	h.secrets["node env"] = secret("nodeenv")
	t.Setenv("AETHER_CONFINE_TEST_SECRET", h.secrets["node env"])

	mustWrite(t, filepath.Join(h.ws, "a.txt"), h.wsText+"\n")
	for link, to := range map[string]string{"escape-file": filepath.Join(h.data, "node.key"), "escape-dir": h.other, "escape-home": home} {
		if err := os.Symlink(to, filepath.Join(h.ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *host) runner(t *testing.T, model *mockmodel.Server) *Runner {
	r := &Runner{
		Path: realCodex(t), Home: h.ownerCodex, StateDir: filepath.Join(h.data, "codex"),
		Timeout: 2 * time.Minute, Env: []string{"CODEX_API_KEY=" + h.envKey}, ExtraArgs: model.ProviderArgs(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	t.Cleanup(r.Wait)
	return r
}

// attack is one command a prompt-injected model runs against a "never" of the view, named by
// the threat row it tries (docs/threats.md).
type attack struct{ row, cmd string }

// attacks are what such a model runs, one command a row.
func (h *host) attacks() []attack {
	home := filepath.Dir(h.homeFile)
	as := []attack{
		{"W1 the data dir: key, token, TLS key, head, database",
			"cat " + strings.Join([]string{h.data + "/node.key", h.data + "/admin.token", h.data + "/admin-tls.key", h.data + "/receipts.head"}, " ") +
				"; head -c 100 " + h.data + "/pact.sqlite; ls -la " + h.data + "; find " + h.data + " -type f"},
		{"W2 the policy", "cat " + h.policy},
		{"W3 the owner's home", "cat " + h.homeFile + "; ls -la " + home},
		{"W4 another brand's workspace and the workspace's siblings", "cat " + h.other + "/secret.txt " + h.sibling + "/secret.txt"},
		{"W5 symlinks in the workspace that point out of it", "cat escape-file escape-dir/secret.txt; ls escape-home"},
		{"W6 environments: codex's own, the node's and every other process's", "env; cat /proc/*/environ | tr '\\0' '\\n'"},
		{"W7 codex's credential: the owner's sign-in and the turn's own CODEX_HOME",
			"cat " + h.ownerCodex + "/auth.json; cat $CODEX_HOME/auth.json; grep -rs SECRET $CODEX_HOME $HOME /tmp"},
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		as = append(as, attack{"W1 W2 W3 python3 reads the data dir, the policy and the owner's home",
			`python3 -c "import sys; [sys.stdout.write(open(p).read()) for p in sys.argv[1:]]" ` + h.data + "/node.key " + h.policy + " " + h.homeFile})
	}
	return as
}

// commands are a turn's: a read of the workspace, the attacks, then more.
func commands(attacks []attack, more ...string) []string {
	cmds := []string{"cat a.txt"}
	for _, a := range attacks {
		cmds = append(cmds, a.cmd)
	}
	return append(cmds, more...)
}

// noneLeaked checks, in a subtest named by each attack's row, that what the attack's command
// sent back to the model holds no secret. outs are the turn's outputs, in commands' order.
func (h *host) noneLeaked(t *testing.T, attacks []attack, outs []string) {
	t.Helper()
	for i, a := range attacks {
		t.Run(a.row, func(t *testing.T) {
			h.noSecrets(t, outs[1+i])
			if t.Failed() {
				t.Logf("%s\nsent back: %s", a.cmd, outs[1+i])
			}
		})
	}
}

// run plays the commands as one turn and returns everything the model was sent back.
func (h *host) run(t *testing.T, access domain.AccessMode, cmds []string) (Result, string, []string, *mockmodel.Server) {
	t.Helper()
	var steps []mockmodel.Step
	for _, c := range cmds {
		steps = append(steps, mockmodel.Shell(c))
	}
	model := mockmodel.New(append(steps, mockmodel.Message("done"))...)
	t.Cleanup(model.Close)
	res, err := h.runner(t, model).Run(context.Background(), Request{Workspace: h.ws, AccessMode: access, Prompt: "review", Conversation: "agent\x00brand"}, nil)
	if err != nil || res.Status != StatusCompleted {
		t.Fatalf("turn: %v %+v", err, res)
	}
	reqs := model.Requests()
	if len(reqs) != len(cmds)+1 {
		t.Fatalf("%d model requests for %d commands", len(reqs), len(cmds))
	}
	outs := reqs[len(reqs)-1].ToolOutput
	if len(outs) != len(cmds) {
		t.Fatalf("%d tool outputs for %d commands", len(outs), len(cmds))
	}
	return res, strings.Join(outs, "\n"), outs, model
}

// noSecrets fails for each secret that reached the model.
func (h *host) noSecrets(t *testing.T, seen string) {
	t.Helper()
	for what, s := range h.secrets {
		if strings.Contains(seen, s) {
			t.Errorf("the model got the %s", what)
		}
	}
	if strings.Contains(seen, h.envKey) {
		t.Error("the model got codex's API key")
	}
}

func TestConfineReadOnly(t *testing.T) {
	h := newHost(t)
	// W17 the view itself cannot be made writable, not even by a tree that root started
	remount := "mount -o remount,rw,bind " + h.ws + " " + h.ws + "; mount -t tmpfs none /usr; echo pwn > pwned.txt; test -x /usr/bin/env && echo USR-INTACT"
	attacks := h.attacks()
	_, seen, outs, model := h.run(t, domain.ReadOnly, commands(attacks, remount))
	if _, err := os.Stat(filepath.Join(h.ws, "pwned.txt")); !os.IsNotExist(err) {
		t.Errorf("W17 a read-only workspace was written after a remount: %v", err)
	}
	if !strings.Contains(seen, "USR-INTACT") { // no tmpfs hid the system
		t.Errorf("W17 /usr was replaced: %s", seen)
	}
	if !strings.Contains(seen, h.wsText) {
		t.Fatalf("a workspace file could not be read: %s", seen)
	}
	h.noSecrets(t, seen)
	h.noneLeaked(t, attacks, outs)
	// W8 codex itself reached its model with the key the commands could not read.
	if auth := model.Requests()[0].Header.Get("Authorization"); auth != "Bearer "+h.envKey {
		t.Errorf("codex called its model with %q", auth)
	}
	if t.Failed() {
		t.Logf("what the model saw:\n%s", seen)
	}
}

// S6 with the real codex: told by its model to write in a read_only workspace, it changes
// nothing there, and the turn is no violation (the digests found nothing to report).
func TestConfineReadOnlyWrite(t *testing.T) {
	t.Run("S6 the real codex told to write in a read-only workspace", func(t *testing.T) {
		h := newHost(t)
		res, seen, _, _ := h.run(t, domain.ReadOnly, commands(nil,
			"echo pwn > a.txt; echo pwn > pwned.txt; mkdir made; touch -d 2001-01-01 a.txt; chmod 600 a.txt; echo TRIED"))
		if !strings.Contains(seen, "TRIED") {
			t.Fatalf("the write commands did not run: %s", seen)
		}
		if b, err := os.ReadFile(filepath.Join(h.ws, "a.txt")); err != nil || string(b) != h.wsText+"\n" {
			t.Errorf("a.txt is now %q (%v)", b, err)
		}
		for _, name := range []string{"pwned.txt", "made"} {
			if _, err := os.Lstat(filepath.Join(h.ws, name)); !os.IsNotExist(err) {
				t.Errorf("%s was made in the read-only workspace: %v", name, err)
			}
		}
		if st, err := os.Stat(filepath.Join(h.ws, "a.txt")); err != nil || st.ModTime().Year() == 2001 || st.Mode().Perm() == 0o600 {
			t.Errorf("a.txt's metadata changed: %v %v", st, err)
		}
		if res.WorkspaceChanged {
			t.Errorf("the turn reports changes: %q", res.ChangedPaths)
		}
	})
}

func TestConfineReadWrite(t *testing.T) {
	h := newHost(t)
	hostTmp := filepath.Join(os.TempDir(), "aether-confine-"+filepath.Base(h.dir))
	t.Cleanup(func() { os.Remove(hostTmp) })
	ownerHome := filepath.Join(filepath.Dir(h.homeFile), ".aether-confine-written-"+filepath.Base(h.dir))
	t.Cleanup(func() { os.Remove(ownerHome) })
	writes := []string{
		"echo made > made.txt",
		// W9 writes outside the workspace: the owner's home, the host's /tmp, the data dir,
		// another brand's workspace, the policy
		"echo pwn > " + ownerHome + "; echo pwn > " + hostTmp + "; echo pwn >> " + h.data + "/admin.token; echo pwn > " +
			h.other + "/pwn.txt; echo pwn >> " + h.policy + "; echo pwn > escape-dir/pwn.txt",
	}
	attacks := h.attacks()
	_, seen, outs, _ := h.run(t, domain.ReadWrite, commands(attacks, writes...))
	if !strings.Contains(seen, h.wsText) {
		t.Fatalf("a workspace file could not be read: %s", seen)
	}
	h.noSecrets(t, seen)
	h.noneLeaked(t, attacks, outs)
	if data, err := os.ReadFile(filepath.Join(h.ws, "made.txt")); err != nil || string(data) != "made\n" {
		t.Errorf("a write inside the workspace failed: %q %v", data, err)
	}
	for _, p := range []string{ownerHome, hostTmp, filepath.Join(h.other, "pwn.txt")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("W9 the turn wrote %s", p)
		}
	}
	for what, path := range map[string]string{"admin.token": filepath.Join(h.data, "admin.token"), "policy": h.policy} {
		if data, _ := os.ReadFile(path); string(data) != h.secrets[what]+"\n" {
			t.Errorf("W9 the turn changed the %s: %q", what, data)
		}
	}
	if t.Failed() {
		t.Logf("what the model saw:\n%s", seen)
	}
}

// TestConfineTurns: two agents' turns at once see neither each other's scratch nor each
// other's codex sessions (W16); a conversation still resumes its own thread, never another's.
// One turn after another on the same runner: the second reads what the first left in its
// /tmp and HOME, and in any scratch folder still on disk.
func TestConfineNextTurn(t *testing.T) {
	t.Run("W19 the next turn reads what the last one left in its scratch", func(t *testing.T) {
		h := newHost(t)
		left := secret("left behind")
		first := mockmodel.New(mockmodel.Shell("echo "+left+" > /tmp/left; echo "+left+" > $HOME/left"), mockmodel.Message("first done"))
		defer first.Close()
		second := mockmodel.New(mockmodel.Shell("cat /tmp/left $HOME/left; ls -la /tmp $HOME; grep -rs "+left[:16]+" /tmp $HOME "+
			filepath.Join(h.data, "codex")), mockmodel.Message("second done"))
		defer second.Close()
		r := h.runner(t, first)
		run := func(prompt string) {
			t.Helper()
			res, err := r.Run(context.Background(), Request{Workspace: h.ws, AccessMode: domain.ReadWrite, Prompt: prompt, Conversation: "alice\x00review"}, nil)
			if err != nil || res.Status != StatusCompleted {
				t.Fatalf("turn %s: %v %+v", prompt, err, res)
			}
		}
		run("first")
		r.ExtraArgs = second.ProviderArgs()
		run("second")
		if seen := strings.Join(second.Requests()[1].ToolOutput, "\n"); strings.Contains(seen, left) {
			t.Errorf("W19 the next turn read what the last one left in its scratch: %s", seen)
		}
		r.Wait()
		if left, _ := filepath.Glob(filepath.Join(r.StateDir, "turns", "*")); len(left) != 0 {
			t.Errorf("scratch folders left after Wait: %q", left)
		}
	})
}

func TestConfineTurns(t *testing.T) {
	h := newHost(t)
	wsB := filepath.Join(h.dir, "ws-b")
	mustWrite(t, filepath.Join(wsB, "b.txt"), "b\n")
	aSecret := secret("scratch")
	// A writes its scratch; its next step, which reads the scratch back, is held in the model
	// until B has tried everything.
	goAhead := make(chan struct{})
	modelA := mockmodel.New(mockmodel.Shell("echo "+aSecret+" > /tmp/a-secret"),
		mockmodel.Hold(goAhead, mockmodel.Shell("cat /tmp/a-secret")), mockmodel.Message("A done"))
	defer modelA.Close()
	modelB := mockmodel.New(mockmodel.Shell("cat /tmp/a-secret; ls -la /tmp $HOME; find / -name 'rollout-*' -not -path '/proc/*' 2>/dev/null; "+
		"grep -rs "+aSecret[:12]+" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr; echo pwn > /tmp/a-secret"),
		mockmodel.Message("B done"))
	defer modelB.Close()
	ra, rb := h.runner(t, modelA), h.runner(t, modelB)
	ra.expire = func() <-chan struct{} { return nil } // A waits for all of B's turn, however long
	convA, convB := "alice\x00review", "bob\x00review"

	aDone := make(chan Result, 1)
	go func() {
		res, err := ra.Run(context.Background(), Request{Workspace: h.ws, AccessMode: domain.ReadWrite, Prompt: "A", Conversation: convA}, nil)
		if err != nil {
			t.Error(err)
		}
		aDone <- res
	}()
	// B starts once A's scratch holds its secret: codex has sent the model what A's first
	// command printed.
	modelA.WaitRequests(2)
	found, _ := filepath.Glob(filepath.Join(ra.StateDir, "turns", "*", "tmp", "a-secret"))
	if len(found) != 1 {
		t.Fatalf("turn A's scratch holds no secret: %q", found)
	}
	resB, err := rb.Run(context.Background(), Request{Workspace: wsB, AccessMode: domain.ReadWrite, Prompt: "B", Conversation: convB}, nil)
	if err != nil || resB.Status != StatusCompleted {
		t.Fatalf("turn B: %v %+v", err, resB)
	}
	close(goAhead)
	resA := <-aDone
	if resA.Status != StatusCompleted {
		t.Fatalf("turn A: %+v", resA)
	}
	seenB := strings.Join(modelB.Requests()[1].ToolOutput, "\n")
	if strings.Contains(seenB, aSecret) {
		t.Errorf("W16 turn B read turn A's scratch: %s", seenB)
	}
	if strings.Contains(seenB, resA.ThreadID) || !strings.Contains(seenB, resB.ThreadID) {
		t.Errorf("W16 turn B saw turn A's codex session %s, or not its own %s: %s", resA.ThreadID, resB.ThreadID, seenB)
	}
	seenA := strings.Join(modelA.Requests()[2].ToolOutput, "\n")
	if !strings.Contains(seenA, aSecret) || strings.Contains(seenA, "pwn") {
		t.Errorf("W16 turn A's scratch was changed by turn B: %s", seenA)
	}
	ra.Wait()
	rb.Wait()
	if left, _ := filepath.Glob(filepath.Join(ra.StateDir, "turns", "*")); len(left) != 0 {
		t.Errorf("scratch folders left after the turns: %q", left)
	}

	t.Run("resume", func(t *testing.T) {
		again := mockmodel.New(mockmodel.Message("A again"))
		defer again.Close()
		res, err := h.runner(t, again).Run(context.Background(), Request{Workspace: h.ws, AccessMode: domain.ReadOnly, Prompt: "more", ThreadID: resA.ThreadID, Conversation: convA}, nil)
		if err != nil || res.Status != StatusCompleted || res.ThreadID != resA.ThreadID {
			t.Fatalf("A's own thread did not resume: %v %+v", err, res)
		}
		res, err = h.runner(t, again).Run(context.Background(), Request{Workspace: wsB, AccessMode: domain.ReadOnly, Prompt: "steal", ThreadID: resA.ThreadID, Conversation: convB}, nil)
		if err != nil || res.Status != StatusFailed || !strings.HasPrefix(res.Reason, "the codex thread to resume was not found") {
			t.Fatalf("W16 B resumed A's thread: %v %+v", err, res)
		}
	})
}

// TestConfineUnavailable: where the kernel refuses the sandbox's namespaces, no turn runs
// codex; the reason says what is missing (W15). The test runs itself again in a user
// namespace of its own where new namespaces are forbidden, as a kernel with them off would.
func TestConfineUnavailable(t *testing.T) {
	if os.Getenv("AETHER_TEST_NO_USERNS") == "1" {
		model := mockmodel.New(mockmodel.Message("must not run"))
		defer model.Close()
		h := newHost(t)
		r := h.runner(t, model)
		st := r.sandbox().Check(context.Background())
		if st.Available || !strings.Contains(st.Reason, "user namespaces") {
			t.Fatalf("confinement %+v", st)
		}
		res, err := r.Run(context.Background(), Request{Workspace: h.ws, AccessMode: domain.ReadOnly, Prompt: "hi"}, nil)
		if !errors.Is(err, confine.ErrUnavailable) || res.Status != StatusFailed || !strings.HasPrefix(res.Reason, "Confinement: unavailable — ") {
			t.Fatalf("W15 err %v result %+v", err, res)
		}
		if n := len(model.Requests()); n != 0 {
			t.Fatalf("W15 codex ran unconfined: %d model requests", n)
		}
		t.Log(res.Reason)
		return
	}
	realCodex(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1)")
	}
	script := `echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" -test.run '^TestConfineUnavailable$' -test.v`
	cmd := exec.Command(unshare, "--user", "--map-root-user", "sh", "-c", script, os.Args[0])
	cmd.Env = append(os.Environ(), "AETHER_TEST_NO_USERNS=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestConfineUnavailable") {
		t.Fatalf("in a user namespace without new namespaces: %v\n%s", err, out)
	}
	t.Logf("%s", out)

	t.Run("no bubblewrap", func(t *testing.T) {
		model := mockmodel.New(mockmodel.Message("must not run"))
		defer model.Close()
		h := newHost(t)
		r := h.runner(t, model)
		r.Sandbox = &confine.Sandbox{Path: filepath.Join(h.dir, "no-such-bwrap")}
		res, err := r.Run(context.Background(), Request{Workspace: h.ws, AccessMode: domain.ReadOnly, Prompt: "hi"}, nil)
		if !errors.Is(err, confine.ErrUnavailable) || res.Status != StatusFailed ||
			!strings.Contains(res.Reason, "Confinement: unavailable — bubblewrap is not installed") || !strings.Contains(res.Reason, "apt install bubblewrap") {
			t.Fatalf("W15 err %v result %+v", err, res)
		}
		if n := len(model.Requests()); n != 0 {
			t.Fatalf("W15 codex ran unconfined: %d model requests", n)
		}
		if h := r.Check(context.Background()); h.Ready() || h.Error != res.Reason {
			t.Fatalf("health %+v; want the turn's reason %q", h, res.Reason)
		}
	})
}

// ownerUser is the unprivileged account TestConfinementAsOwner creates to run the confinement
// tests as: root reads every file and holds capabilities an owner lacks.
const ownerUser = "aether-owner"

// TestConfinementAsOwner runs the confinement tests again as an ordinary user, the way an
// owner runs the node. As root it creates that user; run unprivileged, the tests above already
// are the owner's.
func TestConfinementAsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the confinement tests ran as this user")
	}
	if runtime.GOOS != "linux" {
		t.Skip("confinement exists on Linux only")
	}
	bin := realCodex(t)
	if _, err := user.Lookup(ownerUser); err != nil {
		if out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/sh", ownerUser).CombinedOutput(); err != nil {
			t.Fatalf("useradd %s: %v\n%s", ownerUser, err, out)
		}
	}
	u, err := user.Lookup(ownerUser)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The test binary and codex must be the user's to run: copy them where it can.
	shared, err := os.MkdirTemp("/var/tmp", "aether-owner-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	testBin := filepath.Join(shared, "codex.test")
	if out, err := exec.Command("cp", os.Args[0], testBin).CombinedOutput(); err != nil {
		t.Fatalf("copy the test binary: %v\n%s", err, out)
	}
	if err := exec.Command("runuser", "-u", ownerUser, "--", bin, "--version").Run(); err != nil {
		pkg := filepath.Dir(filepath.Dir(bin)) // …/vendor/<target>: codex and its helpers
		if out, err := exec.Command("cp", "-a", pkg, filepath.Join(shared, "codex")).CombinedOutput(); err != nil {
			t.Fatalf("copy codex for %s: %v\n%s", ownerUser, err, out)
		}
		bin = filepath.Join(shared, "codex", "bin", filepath.Base(bin))
		exec.Command("chmod", "-R", "a+rX", filepath.Join(shared, "codex")).Run()
	}
	// The view attacks, what codex reads by itself and what a turn plants (W21–W23), and the
	// real codex of a node killed before its turn's go-ahead (W20;
	// the fake codex needs a Go toolchain to build, which the owner's PATH has not).
	for _, run := range []struct {
		pattern string
		names   []string
	}{
		{"^TestConfine(ReadOnly|ReadWrite|Turns|Unavailable)$", []string{"TestConfineReadOnly", "TestConfineReadWrite", "TestConfineTurns", "TestConfineUnavailable"}},
		{"^(TestCodexReadsNoWorkspaceInstructions|TestReadWriteTurnPlantsNothing)$", []string{"TestCodexReadsNoWorkspaceInstructions", "TestReadWriteTurnPlantsNothing"}},
		{"^TestNodeKilledBeforeGoAhead$/real_codex", []string{"TestNodeKilledBeforeGoAhead"}},
	} {
		cmd := exec.Command(testBin, "-test.run", run.pattern, "-test.v", "-test.count=1")
		cmd.Dir = shared
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + u.HomeDir, "USER=" + ownerUser, "AETHER_REAL_CODEX=" + bin}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		out, err := cmd.CombinedOutput()
		t.Logf("as %s (uid %d):\n%s", ownerUser, uid, out)
		if err != nil {
			t.Fatalf("the confinement tests failed as %s: %v", ownerUser, err)
		}
		for _, name := range run.names {
			if !strings.Contains(string(out), "--- PASS: "+name+" ") || strings.Contains(string(out), "--- SKIP: "+name+"/") {
				t.Errorf("%s did not pass as %s", name, ownerUser)
			}
		}
	}
}
