package e2e

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/confine"
	"github.com/aether/aether/backend/identity/identitytest"
)

// Benchmarks print ratios measured side by side in one run, ours against a
// baseline; they never fail on a timing. Run them with `make bench` (AETHER_BENCH=1).
func benchOnly(t *testing.T) {
	if os.Getenv("AETHER_BENCH") == "" {
		t.Skip("benchmark: set AETHER_BENCH=1 (make bench)")
	}
}

// instant is the in-process stand-in for Codex: it answers at once.
type instant struct{}

func (instant) Run(ctx context.Context, req codex.Request, progress func(codex.Progress)) (codex.Result, error) {
	now := time.Now()
	return codex.Result{Answer: "ok", Status: "completed", StartedAt: now, EndedAt: now}, nil
}

// bareExecutor is the baseline's executor: the same events, nothing else.
type bareExecutor struct{}

func (bareExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("ok")), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (bareExecutor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {}
}

// turnsPerSecond runs clients×perClient non-streaming turns and returns the rate.
func turnsPerSecond(t *testing.T, clients, perClient int, newClient func(i int) *a2aclient.Client) float64 {
	t.Helper()
	cs := make([]*a2aclient.Client, clients)
	for i := range cs {
		cs[i] = newClient(i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for i := range cs {
		wg.Add(1)
		go func(c *a2aclient.Client) {
			defer wg.Done()
			for j := 0; j < perClient; j++ {
				res, err := c.SendMessage(context.Background(), textMessage("bench"))
				if err != nil {
					errs <- err
					return
				}
				if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
					errs <- fmt.Errorf("turn did not complete: %v", res)
					return
				}
			}
		}(cs[i])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return float64(clients*perClient) / time.Since(start).Seconds()
}

// TestPrintB1 compares full delegated turns through the gateway (identity,
// delegation, task persisted, receipt signed and committed) with the bare
// a2a-go JSON-RPC handler on an in-memory store, at 1, 8, 32 and 128 clients.
func TestPrintB1(t *testing.T) {
	benchOnly(t)
	e := newEnv(t)
	e.stop()
	e.opts.Runner = instant{}
	e.start()

	bare := a2asrv.NewHandler(bareExecutor{})
	srv := httptest.NewServer(a2asrv.NewJSONRPCHandler(bare))
	defer srv.Close()
	bareCard := &a2a.AgentCard{SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL, a2a.TransportProtocolJSONRPC)}}

	// The clients' agents come from 8 issuers (a loopback address each, so 8 issuer sites):
	// one site alone may not hold the node's whole budget (docs/wire.md, limits).
	issuers := []*identitytest.Issuer{e.issuer}
	for i := 2; i <= 8; i++ {
		issuers = append(issuers, identitytest.NewIssuer(t, identitytest.WithAddr(fmt.Sprintf("127.0.0.%d:0", i))))
	}
	agents := map[int]*agent{}
	ourClient := func(i int) *a2aclient.Client {
		a := agents[i]
		if a == nil {
			a = e.agentOf(issuers[i%len(issuers)], fmt.Sprintf("bench-%d", i))
			a.setDelegation(e.delegate(t, a, "review"))
			agents[i] = a
		}
		return a.client("review", a2a.TransportProtocolJSONRPC)
	}
	bareClient := func(int) *a2aclient.Client {
		c, err := a2aclient.NewFromCard(context.Background(), bareCard, a2aclient.WithJSONRPCTransport(&http.Client{}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Interleaved rounds: the machine is shared and its speed drifts over seconds, so each
	// round's ratio is taken against the baseline run right beside it, and the median of
	// those is printed (with the medians of each side).
	const rounds = 7
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, clients := range []int{1, 8, 32, 128} {
		per := max(2, 256/clients)
		var ours, base, ratios []float64
		for range rounds {
			o, b := turnsPerSecond(t, clients, per, ourClient), turnsPerSecond(t, clients, per, bareClient)
			ours, base, ratios = append(ours, o), append(base, b), append(ratios, o/b)
		}
		fmt.Printf("B1 clients=%d ours=%.0f/s baseline=%.0f/s ratio=%.2f\n", clients, median(ours), median(base), median(ratios))
	}
}

// The turn's folders as its view names them (the runner's, backend/codex/view.go).
const viewHome, viewTmp, viewCodexHome = "/run/aether/home", "/tmp", "/run/aether/codex"

// TestPrintB3 measures one turn with the fake Codex (instant exit) through the gateway
// against running the fake directly (ratio=). The two budgets are apart: confine= is what
// a bubblewrap view with a turn's mounts (system, the turn's scratch as /tmp and HOME, the
// conversation's codex state, codex's folder, the harness's record folder, the workspace)
// adds to the fake, and node-added= is the rest, what the node adds beyond the confined fake.
// added/confine= is node-added over confine= of the same run: the budget (≤ 0.4) is that
// ratio, since a millisecond figure moves with the machine.
func TestPrintB3(t *testing.T) {
	benchOnly(t)
	e := newEnv(t)
	a := e.agent("b3")
	a.setDelegation(e.delegate(t, a, "review"))
	c := a.client("review", a2a.TransportProtocolJSONRPC)
	const n = 100
	var ours, direct, confined []time.Duration
	scratches, state := t.TempDir(), t.TempDir()
	out := filepath.Join(t.TempDir(), "last.txt")
	box := &confine.Sandbox{}
	if st := box.Check(context.Background()); !st.Available {
		t.Fatal(st.Text())
	}
	fakeArgs := []string{e.opts.CodexPath, "exec", "--json", "--color", "never", "--sandbox", "read-only", "--cd", e.workspace, "--skip-git-repo-check", "-o", out, "--", "-"}
	inView := slices.Clone(fakeArgs)
	inView[slices.Index(inView, out)] = "/tmp/last.txt"
	// confinedFake is the fake in a view as a turn's: its scratch is fresh (never reused, as a
	// turn's is not) and made before the clock starts, as the runner's spare is; the folders
	// bwrap makes in it, for the mounts that fall inside /tmp here, are confinement's cost.
	confinedFake := func() (argv []string, scratch string) {
		scratch, err := os.MkdirTemp(scratches, "t-")
		if err != nil {
			t.Fatal(err)
		}
		tmp, home := filepath.Join(scratch, "tmp"), filepath.Join(scratch, "home")
		for _, d := range []string{tmp, home} {
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		view := confine.View{Dir: e.workspace, Mounts: []confine.Mount{
			{Source: tmp, Target: viewTmp, Writable: true}, {Source: home, Target: viewHome, Writable: true},
			{Source: state, Target: viewCodexHome, Writable: true}, {Source: filepath.Dir(e.opts.CodexPath)}}}
		for _, m := range e.opts.CodexTestMounts {
			view.Mounts = append(view.Mounts, confine.Mount{Source: m, Writable: true})
		}
		view.Mounts = append(view.Mounts, confine.Mount{Source: e.workspace})
		bwrap, wrapped, err := box.Wrap(view, inView)
		if err != nil {
			t.Fatal(err)
		}
		return append([]string{bwrap}, wrapped...), scratch
	}
	// Both fakes get a turn's environment, as the runner gives it, so each writes its session
	// under CODEX_HOME as in a turn: the confined one in the view's folders, the direct one in
	// twins of them outside, never in the machine's own ~/.codex.
	turnEnv := func(home, tmp, codexHome string) []string {
		env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + tmp, "CODEX_HOME=" + codexHome}
		if v, ok := os.LookupEnv("LANG"); ok {
			env = append(env, "LANG="+v)
		}
		return append(env, e.opts.CodexEnv...)
	}
	directEnv := turnEnv(t.TempDir(), t.TempDir(), t.TempDir())
	viewEnv := turnEnv(viewHome, viewTmp, viewCodexHome)
	for i := 0; i < n; i++ {
		start := time.Now()
		if task := a.send(c, "", "bench"); task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("turn: %s", task.Status.State)
		}
		ours = append(ours, time.Since(start))

		inBox, scratch := confinedFake()
		for _, run := range []struct {
			argv []string
			env  []string
			into *[]time.Duration
		}{{fakeArgs, directEnv, &direct}, {inBox, viewEnv, &confined}} {
			cmd := exec.Command(run.argv[0], run.argv[1:]...)
			cmd.Env = run.env
			cmd.Stdin = strings.NewReader("bench")
			start = time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			*run.into = append(*run.into, time.Since(start))
		}
		if err := os.RemoveAll(scratch); err != nil {
			t.Fatal(err)
		}
	}
	p := func(d []time.Duration, q float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[int(q*float64(len(s)-1))]
	}
	// What is added is taken turn by turn, each against the runs beside it: the machine's
	// drift over the run cancels out of a difference.
	minus := func(a, b []time.Duration) []time.Duration {
		d := make([]time.Duration, len(a))
		for i := range a {
			d[i] = a[i] - b[i]
		}
		return d
	}
	added, confine := minus(ours, confined), minus(confined, direct)
	for _, q := range []struct {
		name string
		v    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		o, b := p(ours, q.v), p(direct, q.v)
		na, cf := p(added, q.v), p(confine, q.v)
		fmt.Printf("B3-%s ours=%.1fms baseline=%.1fms ratio=%.2f node-added=%.1fms confine=%.1fms added/confine=%.2f\n", q.name, ms(o), ms(b), float64(o)/float64(b), ms(na), ms(cf), float64(na)/float64(cf))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
