//go:build linux

package codex

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codex/mockmodel"
	"github.com/aether/aether/backend/confine"
	"github.com/aether/aether/backend/domain"
)

// killedNodeEnv carries a killedNode to the helper process that plays the node.
const killedNodeEnv = "AETHER_TEST_KILLED_NODE"

// killedNode is the turn the helper runs: its Runner's settings and the workspace.
type killedNode struct {
	Path, Home, StateDir, Workspace, Prompt string
	Env, ExtraArgs, TestMounts              []string
}

// TestKilledNodeHelper is the node of killNodeHeld: it runs one read_write turn whose Admit
// says "held" on stdout and never returns, and waits to be killed.
func TestKilledNodeHelper(t *testing.T) {
	spec := os.Getenv(killedNodeEnv)
	if spec == "" {
		t.Skip("the node of killNodeHeld")
	}
	var k killedNode
	if err := json.Unmarshal([]byte(spec), &k); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Path: k.Path, Home: k.Home, StateDir: k.StateDir, Env: k.Env, ExtraArgs: k.ExtraArgs, TestMounts: k.TestMounts,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	_, err := r.Run(context.Background(), Request{Workspace: k.Workspace, AccessMode: domain.ReadWrite, Prompt: k.Prompt,
		Conversation: "agent\x00brand", Admit: func(context.Context) error {
			os.Stdout.WriteString("held\n")
			select {} // the node is killed here
		}}, nil)
	t.Fatalf("the turn ended: %v", err)
}

// killNodeHeld plays the node in a process of its own, kills it (SIGKILL) while its turn's
// view waits for the go-ahead, and waits until what it left, the processes whose environment
// holds marker, has ended by itself (docs/threats.md, W20).
func killNodeHeld(t *testing.T, k killedNode, marker string) {
	t.Helper()
	spec, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledNodeHelper$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), killedNodeEnv+"="+string(spec))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	held := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "held" {
				held <- true
			}
		}
		close(held)
	}()
	if !<-held {
		cmd.Wait()
		t.Fatal("the node ended before its turn was held")
	}
	time.Sleep(500 * time.Millisecond) // bwrap makes a view in milliseconds: it waits by now
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for deadline := time.Now().Add(time.Minute); len(codextest.Processes(marker)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			for _, pid := range codextest.Processes(marker) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatal("the killed node's view still runs after a minute")
		}
	}
}

// TestNodeKilledBeforeGoAhead: bwrap's view arms its parent-death signal only as it starts
// codex, and takes the go-ahead pipe, closed with the node, for a go-ahead: a node killed
// while a turn's view waits leaves it to start codex with nobody to admit, watch or stop the
// turn. The view's codex gets no prompt (the fake records what it read), and the real codex
// then does nothing: its model gets no request and the workspace stays as it was.
func TestNodeKilledBeforeGoAhead(t *testing.T) {
	t.Run("W20 a node killed before a turn's go-ahead: the view's codex gets no prompt", func(t *testing.T) {
		f := newFixture(t)
		killNodeHeld(t, killedNode{Path: f.r.Path, Home: f.r.Home, StateDir: f.r.StateDir, Workspace: f.ws,
			Prompt: f.req(codextest.ScenarioOK).Prompt, Env: f.r.Env, TestMounts: f.r.TestMounts}, f.record)
		if recs := f.records(t); len(recs) != 0 {
			t.Fatalf("codex started the turn after the node died, with the prompt %q", recs[0].Prompt)
		}
	})
	t.Run("W20 a node killed before a turn's go-ahead: the real codex does not do the turn", func(t *testing.T) {
		h := newHost(t)
		model := mockmodel.New(mockmodel.Shell("touch ran-unadmitted"), mockmodel.Message("done"))
		t.Cleanup(model.Close)
		killNodeHeld(t, killedNode{Path: realCodex(t), Home: h.ownerCodex, StateDir: filepath.Join(h.data, "codex"),
			Workspace: h.ws, Prompt: "review", Env: []string{"CODEX_API_KEY=" + h.envKey}, ExtraArgs: model.ProviderArgs()}, h.envKey)
		if reqs := model.Requests(); len(reqs) != 0 {
			t.Errorf("codex asked its model %d times after the node died", len(reqs))
		}
		if _, err := os.Stat(filepath.Join(h.ws, "ran-unadmitted")); err == nil {
			t.Error("codex ran a command in the workspace after the node died")
		}
	})
}

// TestLeftoverViewsEnded leaves a view waiting for a go-ahead that never comes, as a node
// killed mid-turn leaves one, and starts a Runner on the same state dir, as the node's next
// start does: RemoveLeftovers ends it, and leaves a view of another state dir alone.
func TestLeftoverViewsEnded(t *testing.T) {
	box := &confine.Sandbox{}
	if st := box.Check(context.Background()); !st.Available {
		t.Skip(st.Text())
	}
	// leave makes a waiting view in a turn scratch folder under stateDir.
	leave := func(stateDir string) *os.File {
		tmp := filepath.Join(stateDir, "turns", "t-left", "tmp")
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			t.Fatal(err)
		}
		goR, goW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		bin, args, err := box.Wrap(confine.View{Mounts: []confine.Mount{{Source: tmp, Target: "/tmp", Writable: true}}, BlockFD: 3},
			[]string{"/usr/bin/true"})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, args...)
		cmd.ExtraFiles = []*os.File{goR}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		goR.Close()
		go cmd.Wait()
		return goW // held open: the view waits on
	}
	views := func(stateDir string) []*os.Process {
		scratch := filepath.Join(stateDir, "turns", "t-")
		return processesWith(func(argv []string) bool { return isView(argv, scratch) })
	}
	mine, other := &Runner{StateDir: t.TempDir()}, &Runner{StateDir: t.TempDir()}
	defer leave(mine.StateDir).Close()
	defer leave(other.StateDir).Close()
	waitUntil(func() bool { return len(views(mine.StateDir)) >= 2 && len(views(other.StateDir)) >= 2 }) // bwrap made the views
	t.Run("W20 a view a killed node left behind is ended when the node starts again", func(t *testing.T) {
		ended, err := mine.RemoveLeftovers()
		if err != nil || ended == 0 {
			t.Fatalf("RemoveLeftovers ended %d processes: %v", ended, err)
		}
		waitUntil(func() bool { return len(views(mine.StateDir)) == 0 }) // the left view ended
		if left, _ := filepath.Glob(filepath.Join(mine.StateDir, "turns", "t-*")); len(left) != 0 {
			t.Errorf("scratch folders left: %q", left)
		}
		if len(views(other.StateDir)) == 0 {
			t.Error("the view of another state dir was ended too")
		}
	})
	if _, err := other.RemoveLeftovers(); err != nil {
		t.Error(err)
	}
}

// TestProbeMarked: a node also starts a view to probe confinement, at its start; killed then,
// it can leave that view waiting too. The probe's command line carries what RemoveLeftovers
// finds left views by.
func TestProbeMarked(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("no bwrap")
	}
	dir := t.TempDir()
	argv, wrapper := filepath.Join(dir, "argv"), filepath.Join(dir, "bwrap")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" >> " + argv + "\nexec " + bwrap + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Runner{StateDir: filepath.Join(dir, "state")}
	r.sandbox().Path = wrapper
	t.Run("W20 the confinement probe carries the mark a left view is found by", func(t *testing.T) {
		if st := r.sandbox().Check(context.Background()); !st.Available {
			t.Fatal(st.Text())
		}
		data, err := os.ReadFile(argv)
		if err != nil {
			t.Fatal(err)
		}
		// The wrapper logged bwrap's --version call, then the probe's arguments.
		probe := strings.Split(strings.TrimSpace(string(data)), "\n")[1:]
		if scratch := filepath.Join(r.StateDir, "turns", "t-"); !isView(append([]string{"/usr/bin/bwrap"}, probe...), scratch) {
			t.Fatalf("RemoveLeftovers would not know the probe's view (no argument under %s):\n%s", scratch, data)
		}
	})
}
