// Command soak runs `make soak`: a real node (`aether node serve`, the fake codex as an instant
// stand-in) under SOAK_AGENTS personal agents (default 200) for SOAK_DURATION (default 60s), each
// with its own identity and grant, calling it through the official a2a-go client: plain and
// streaming turns, GetTask, ListTasks, cancels, un-delegated turns (AUTH_REQUIRED) and broken
// identity JWTs (401). Half-way through, the node is killed with SIGKILL and started again on
// the same data dir. It prints the calls, turn rate and latencies, errors by kind, the node's
// footprint before and after the load, pact.sqlite's size and `aether receipts verify`, and
// ends with one line:
//
//	soak: turns=N errors=E rss_start=XMB rss_end=YMB goroutines_start=A goroutines_end=B receipts=verified|broken kill9=ok|failed
//
// kill9=ok means: no process of the killed node's turns outlives its restart (the kernel ends
// most with it; its next start ends views it was still making, docs/threats.md W20), the killed
// data dir verifies, every receipt an agent got with an answer is in the store as it was sent, no task is
// left WORKING or SUBMITTED, and the restarted node answered a turn within 2 s of its start.
// It also looks for turn processes that outlive their turn while the node runs (a leak). It
// exits 1 when anything is wrong. It runs only on Linux (bubblewrap confines each turn, and
// /proc shows the node's RSS and the turns' processes).
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/cardjson"
)

const (
	warmUp = 5 * time.Second
	// serveLimit is how soon after its start the restarted node must answer a turn.
	serveLimit = 2 * time.Second
	// agentsPerIssuer is the node's burst of device flows per issuer site (docs/threats.md, F2):
	// the agents come from ceil(agents/20) platforms, each an issuer and its agents on a
	// loopback address of its own.
	agentsPerIssuer = 20
	scope           = "review:read_only"
	brandPolicy     = `[{"id":"review","name":"Code review","description":"Reviews code in my workspace.","capability":"review","workspace":"workspace","accessMode":"read_only","scope":{"id":"review:read_only","description":"Review code (read only)"}}]`
)

func main() {
	ok, err := run(os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(out io.Writer) (bool, error) {
	agents, err := envInt("SOAK_AGENTS", 200)
	if err != nil {
		return false, err
	}
	duration, err := envDuration("SOAK_DURATION", 60*time.Second)
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "aether-soak-")
	if err != nil {
		return false, err
	}
	keep := true // the data dir and the node's log, when something went wrong
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	fail := func(err error) (bool, error) { return false, fmt.Errorf("%w (kept %s)", err, tmp) }
	n, publicURL, err := setUp(tmp)
	if err != nil {
		return fail(err)
	}
	defer n.stop()
	if err := n.start(); err != nil {
		return fail(err)
	}
	if err := n.ready(30 * time.Second); err != nil {
		return fail(err)
	}
	var issuers []*issuer
	for i := range (agents + agentsPerIssuer - 1) / agentsPerIssuer {
		is, err := startIssuer(fmt.Sprintf("127.0.0.%d", i+1))
		if err != nil {
			return fail(err)
		}
		issuers = append(issuers, is)
	}
	o, err := signIn(n.dataDir)
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	crowd, err := enroll(agents, issuers, o, publicURL)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(out, "soak: a node on %s (data dir %s); %d agents of %d issuers (each on its own loopback address) enrolled by the device flow in %s\n",
		publicURL, n.dataDir, agents, len(issuers), time.Since(start).Round(time.Millisecond))

	warm := newTally()
	var inflight atomic.Int64
	load(warmUp, crowd, warm, &inflight)
	before, err := quiet(n, o, issuers)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(out, "soak: after a %s warm-up: %s\n", warmUp, before)

	t := newTally()
	killed := make(chan killReport, 1)
	go func() {
		time.Sleep(duration / 2)
		killed <- kill9(n, t, &inflight)
	}()
	load(duration, crowd, t, &inflight)
	k := <-killed
	after, err := quiet(n, o, issuers)
	if err != nil {
		return fail(err)
	}
	strays := n.strays()
	k.print(out)
	fmt.Fprintf(out, "soak: after %s of load and the restart, settled: %s\n", duration, after)
	fmt.Fprintf(out, "the warm-up answered %d turns; below, the %s of load:\n", warm.turns, duration)
	t.report(out, duration)
	errs := sum(warm.errs) + sum(t.errs)
	if w := sum(warm.errs); w > 0 {
		fmt.Fprintf(out, "errors in the warm-up: %d\n", w)
		warm.report(out, warmUp)
	}

	stuck, err := stuckTasks(crowd)
	if err != nil {
		fmt.Fprintf(out, "listing WORKING and SUBMITTED tasks: %v\n", err)
		errs++
	}
	fmt.Fprintf(out, "tasks left WORKING or SUBMITTED: %d %s\n", len(stuck), strings.Join(stuck[:min(len(stuck), 5)], " "))
	stopErr := n.stop()
	if stopErr != nil {
		fmt.Fprintf(out, "the node did not stop cleanly on SIGTERM: %v\n", stopErr)
	}
	left := n.orphans()
	fmt.Fprintf(out, "after the load, turn processes adopted by init while the node ran: %d %s\n", len(strays), strings.Join(strays, " "))
	fmt.Fprintf(out, "turn processes that outlived the stopped node: %d %s\n", len(left), strings.Join(left, " "))
	verified, err := checkReceipts(out, n, append(warm.receipts, t.receipts...))
	if err != nil {
		return fail(err)
	}
	for _, f := range []string{"pact.sqlite", "pact.sqlite-wal"} {
		if fi, err := os.Stat(filepath.Join(n.dataDir, f)); err == nil {
			fmt.Fprintf(out, "%s: %.1f MB\n", f, float64(fi.Size())/(1<<20))
		}
	}

	var why []string
	if k.err != nil {
		why = append(why, k.err.Error())
	}
	if !k.verified {
		why = append(why, "the killed data dir does not verify")
	}
	if len(k.orphans) > 0 {
		why = append(why, fmt.Sprintf("%d processes of its turns outlived the killed node and its restart", len(k.orphans)))
	}

	if !verified.allThere {
		why = append(why, "receipts that agents got are missing from the store")
	}
	if len(stuck) > 0 {
		why = append(why, fmt.Sprintf("%d tasks are left WORKING or SUBMITTED", len(stuck)))
	}
	if k.firstTurn == 0 || k.firstTurn > serveLimit {
		why = append(why, fmt.Sprintf("the restarted node did not answer a turn within %s of its start", serveLimit))
	}
	receipts, kill := "verified", "ok"
	if !verified.chain || !verified.allThere {
		receipts = "broken"
	}
	if len(why) > 0 {
		kill = "failed"
		fmt.Fprintf(out, "kill9: failed: %s\n", strings.Join(why, "; "))
	}
	// Turn processes that outlived their turn while the node ran, or the node itself, are a leak:
	// not a failed call nor part of the kill, yet a failed soak.
	leaked := len(k.strays) + len(strays) + len(left)
	if leaked > 0 {
		fmt.Fprintf(out, "leak: %d processes of turns outlived their turn or their node (listed above; killed now)\n", leaked)
	}
	ok := errs == 0 && receipts == "verified" && kill == "ok" && stopErr == nil && leaked == 0
	if keep = !ok; keep {
		fmt.Fprintf(out, "kept %s for a look (the node's log: node.log)\n", tmp)
	}
	fmt.Fprintf(out, "soak: turns=%d errors=%d rss_start=%.0fMB rss_end=%.0fMB goroutines_start=%d goroutines_end=%d receipts=%s kill9=%s\n",
		warm.turns+t.turns, errs, before.rssMB, after.rssMB, before.goroutines, after.goroutines, receipts, kill)
	return ok, nil
}

func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a positive number", name, v)
	}
	return n, nil
}

func envDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 4*time.Second {
		return 0, fmt.Errorf("%s=%q: want a duration of at least 4s (the kill comes half-way), such as 60s", name, v)
	}
	return d, nil
}

// setUp builds aether and the fake codex into dir and writes a policy with one read-only brand
// over a workspace; the node is not started yet.
func setUp(dir string) (*nodeProc, string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		return nil, "", fmt.Errorf("run from the module (go env GOMOD): %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	for _, b := range []struct{ out, dir, pkg string }{
		{filepath.Join(dir, "aether"), root, "github.com/aether/aether"},
		{filepath.Join(dir, "codex"), filepath.Join(root, "backend", "codex", "testdata", "fakecodex"), "."},
	} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	workspace := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(workspace, 0o755); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(workspace, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		return nil, "", err
	}
	listen, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	publicURL := "http://" + listen
	pol := fmt.Sprintf(`{"pact":{"publicUrl":%q,"audience":%q,"allowInsecureLocalIssuers":true,"brands":%s}}`, publicURL, publicURL, brandPolicy)
	n := &nodeProc{bin: filepath.Join(dir, "aether"), dataDir: filepath.Join(dir, "data"), policy: filepath.Join(dir, "policy.json"),
		listen: listen, codex: filepath.Join(dir, "codex"), log: filepath.Join(dir, "node.log"),
		marker: "CODEX_API_KEY=soak-" + filepath.Base(dir)}
	n.env = []string{"CODEX_HOME=" + filepath.Join(dir, "codex-home"), n.marker}
	return n, publicURL, os.WriteFile(n.policy, []byte(pol), 0o600)
}

// freeAddr picks a free port below the kernel's ephemeral range (32768 and up), where no
// outgoing connection takes it between the kill and the restart.
func freeAddr() (string, error) {
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr, nil
		}
	}
	return "", errors.New("no free port")
}

// enroll gives each of n agents its identity and, by the device flow with the owner allowing
// it, its grant; eight at a time.
func enroll(n int, issuers []*issuer, o *owner, publicURL string) ([]*agent, error) {
	resp, err := http.Get(publicURL + "/a2a/review/.well-known/agent-card.json")
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var card a2a.AgentCard
	if err == nil {
		err = cardjson.Unmarshal(body, &card) // a2a-go's decoder reads no StringList
	}
	if err != nil {
		return nil, fmt.Errorf("agent card: %w", err)
	}
	crowd := make([]*agent, n)
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				crowd[i], errs[i] = enrollOne(i, issuers[i/agentsPerIssuer], o, publicURL, &card)
			}
		})
	}
	wg.Wait()
	return crowd, errors.Join(errs...)
}

func enrollOne(i int, is *issuer, o *owner, publicURL string, card *a2a.AgentCard) (*agent, error) {
	sub := fmt.Sprintf("agent-%03d", i)
	binding := a2a.TransportProtocolJSONRPC
	if i%2 == 1 {
		binding = a2a.TransportProtocolHTTPJSON
	}
	a := &agent{me: &ident{is: is, sub: sub, aud: publicURL}, bad: &ident{is: is, sub: sub, aud: publicURL, bad: true},
		rng: rand.New(rand.NewPCG(uint64(i), 14))}
	tok, err := deviceFlow(&http.Client{Transport: is.agents, Timeout: time.Minute}, publicURL, scope, a.me.identity, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sub, err)
	}
	a.me.delegation = tok
	if a.c, err = a.me.client(card, binding); err != nil {
		return nil, err
	}
	if a.bc, err = a.bad.client(card, binding); err != nil {
		return nil, err
	}
	a.stranger = &ident{is: is, sub: fmt.Sprintf("stranger-%03d", i), aud: publicURL}
	if a.sc, err = a.stranger.client(card, binding); err != nil {
		return nil, err
	}
	return a, nil
}

// load has every agent call the node, one operation after another, for d; an operation under
// way when d ends is finished.
func load(d time.Duration, crowd []*agent, t *tally, inflight *atomic.Int64) {
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for _, a := range crowd {
		wg.Go(func() {
			for time.Now().Before(end) {
				op := a.pick()
				inflight.Add(1)
				start := time.Now()
				o := a.do(op)
				t.record(op, start, time.Now(), o)
				inflight.Add(-1)
				if o.err != nil {
					time.Sleep(10 * time.Millisecond) // the node may be down: do not spin
				}
			}
		})
	}
	wg.Wait()
}

// quiet closes the clients' idle connections and samples the node once it has settled, so that
// two samples differ only by what the node kept.
func quiet(n *nodeProc, o *owner, issuers []*issuer) (sample, error) {
	for _, is := range issuers {
		is.agents.CloseIdleConnections()
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	o.hc.CloseIdleConnections()
	return n.settled()
}

// killReport is what the kill -9 under load saw.
type killReport struct {
	at        time.Time
	inflight  int64
	underLoad string // the node's footprint just before
	verify    string // `aether receipts verify` on the killed data dir
	verified  bool
	strays    []string      // processes of turns the node no longer had, before the kill
	outlived  int           // processes of its turns still running a second after the kill
	orphans   []string      // those of them still running once the node has started again
	ready     time.Duration // from the restart to /healthz answering
	firstTurn time.Duration // from the restart to the first turn answered
	err       error
}

// kill9 kills the node with SIGKILL under load, verifies its data dir as the kill left it,
// starts it again and waits for it to serve.
func kill9(n *nodeProc, t *tally, inflight *atomic.Int64) (k killReport) {
	if rt, err := n.runtime(); err == nil {
		rss, _ := n.rssMB()
		k.underLoad = sample{rssMB: rss, goroutines: rt.Goroutines, heapMB: float64(rt.HeapBytes) / (1 << 20)}.String()
	}
	k.strays = n.strays()
	k.at, k.inflight = time.Now(), inflight.Load()
	t.mark(func(t *tally) { t.killAt = k.at })
	if k.err = n.kill9(); k.err != nil {
		return k
	}
	// What the kernel did not end with the node, the node's next start must (docs/threats.md,
	// W20): a view it was making is not yet tied to its life.
	outlived := still(n.turnProcs())
	k.outlived = len(outlived)
	defer func() { k.orphans = killAll(pidsOf(still(outlived))) }() // also when the restart fails
	k.verify, k.verified = verifyReceipts(n)
	restart := time.Now()
	t.mark(func(t *tally) { t.restartAt = restart })
	if k.err = n.start(); k.err != nil {
		return k
	}
	if k.err = n.ready(30 * time.Second); k.err != nil {
		return k
	}
	k.ready = time.Since(restart)
	t.mark(func(t *tally) { t.readyAt = time.Now() })
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var first time.Time
		t.mark(func(t *tally) { first = t.firstTurn })
		if !first.IsZero() {
			k.firstTurn = first.Sub(restart)
			break
		}
	}
	return k
}

func (k killReport) print(w io.Writer) {
	fmt.Fprintf(w, "kill -9 under load with %d calls in flight (node then: %s)\n", k.inflight, k.underLoad)
	fmt.Fprintf(w, "  before it, turn processes adopted by init while the node ran: %d %s\n", len(k.strays), strings.Join(k.strays, " "))
	fmt.Fprintf(w, "  turn processes still running a second after the kill: %d; still running once the node served again: %d %s\n",
		k.outlived, len(k.orphans), strings.Join(k.orphans, " "))
	fmt.Fprintf(w, "  receipts verify on the killed data dir: %s\n", k.verify)
	fmt.Fprintf(w, "  restarted: /healthz after %s, first turn answered %s after the start\n", ms(k.ready), ms(k.firstTurn))
	if k.err != nil {
		fmt.Fprintf(w, "  error: %v\n", k.err)
	}
}

// verifyReceipts runs `aether receipts verify` on the node's data dir (the node is not
// running) and returns its last line and whether it verified.
func verifyReceipts(n *nodeProc) (string, bool) {
	start := time.Now()
	cmd := exec.Command(n.bin, "receipts", "verify", "--data-dir", n.dataDir)
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var verdict string
	for _, l := range lines {
		if strings.HasPrefix(l, "OK:") || strings.HasPrefix(l, "FAILED") {
			verdict = l
		}
	}
	if verdict == "" {
		verdict = strings.Join(lines, " / ")
	}
	cpu := time.Duration(0)
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return fmt.Sprintf("%s (%s, cpu %s)", verdict, took.Round(time.Millisecond), cpu.Round(time.Millisecond)),
		err == nil && strings.HasPrefix(verdict, "OK:")
}

// stuckTasks lists every agent's tasks that are WORKING or SUBMITTED once the load is over.
func stuckTasks(crowd []*agent) ([]string, error) {
	var stuck []string
	for _, a := range crowd {
		for _, state := range []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateSubmitted} {
			res, err := a.c.ListTasks(context.Background(), &a2a.ListTasksRequest{Status: state, PageSize: 100})
			if err != nil {
				return stuck, fmt.Errorf("%s: %w", a.me.sub, err)
			}
			for _, task := range res.Tasks {
				stuck = append(stuck, fmt.Sprintf("%s:%s", task.ID, task.Status.State))
			}
		}
	}
	return stuck, nil
}

type receiptCheck struct{ chain, allThere bool }

// checkReceipts verifies the stopped node's receipt chain and looks up every receipt an agent
// got in an export of the store: each must be there, with the JWS the agent got.
func checkReceipts(out io.Writer, n *nodeProc, got []*answered) (receiptCheck, error) {
	var c receiptCheck
	var verdict string
	verdict, c.chain = verifyReceipts(n)
	fmt.Fprintf(out, "receipts verify: %s\n", verdict)
	export := filepath.Join(filepath.Dir(n.dataDir), "receipts.jsonl")
	if msg, err := exec.Command(n.bin, "receipts", "export", "--data-dir", n.dataDir, "--out", export).CombinedOutput(); err != nil {
		return c, fmt.Errorf("aether receipts export: %v\n%s", err, msg)
	}
	f, err := os.Open(export)
	if err != nil {
		return c, err
	}
	defer f.Close()
	stored, status := map[string]string{}, map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			ID, JWS string
			Claims  struct{ Status string }
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return c, fmt.Errorf("export line: %w", err)
		}
		sum := sha256.Sum256([]byte(line.JWS))
		stored[line.ID], status[line.ID] = hex.EncodeToString(sum[:]), line.Claims.Status
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	var missing, changed []string
	for _, r := range got {
		switch h, ok := stored[r.rid]; {
		case !ok:
			missing = append(missing, r.rid+" (task "+r.task+")")
		case h != r.hash:
			changed = append(changed, r.rid)
		}
	}
	fmt.Fprintf(out, "receipts agents got: %d; in the store as sent: %d; missing: %d %s; different: %d %s\n", len(got),
		len(got)-len(missing)-len(changed), len(missing), strings.Join(missing[:min(len(missing), 5)], " "),
		len(changed), strings.Join(changed[:min(len(changed), 5)], " "))
	// The rest are turns whose answer no agent read: those the kill cut off, which the restarted
	// node closed as failed.
	unread := map[string]int{}
	for _, r := range got {
		delete(status, r.rid)
	}
	for _, st := range status {
		unread[st]++
	}
	fmt.Fprintf(out, "receipts of turns no agent got the answer of: %d, by status %v\n", len(status), unread)
	c.allThere = len(missing) == 0 && len(changed) == 0
	return c, nil
}
