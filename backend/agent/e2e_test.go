package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/gateway"
	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
	"github.com/aether/aether/backend/turn"
)

// The tests below drive Run against the real gateway (real consent, store,
// ledger, identity verifier and a2a-go server) with a stand-in coding agent.

const consentURL = "https://127.0.0.1:3000/pact/consent"

type fakeRunner struct {
	mu   sync.Mutex
	fail string // when set, turns fail with this reason
	runs int
	// hold, when set, keeps each turn running until it is closed; started hears of each.
	hold, started chan struct{}
}

func (r *fakeRunner) Run(ctx context.Context, req codex.Request, progress func(codex.Progress)) (codex.Result, error) {
	r.mu.Lock()
	r.runs++
	fail, hold, started := r.fail, r.hold, r.started
	r.mu.Unlock()
	if hold != nil {
		started <- struct{}{}
		<-hold
	}
	start := time.Now()
	progress(codex.Progress{Text: "reading the workspace"})
	if fail != "" {
		return codex.Result{Status: "failed", Reason: fail, ExitCode: 1, StartedAt: start, EndedAt: time.Now()}, nil
	}
	return codex.Result{Status: "completed", Answer: "Reviewed (" + string(req.AccessMode) + "): looks good.", ThreadID: "th-1", StartedAt: start, EndedAt: time.Now()}, nil
}

func (r *fakeRunner) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs
}

type testNode struct {
	dir       string // its data dir
	publicURL string
	consent   *consent.Service
	policy    *policy.Policy // the policy its gateway serves, which the owner decides by
	db        *store.DB
	runner    *fakeRunner
	ledger    *receipts.Ledger
}

func startNode(t *testing.T) *testNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := startNodeIn(t, t.TempDir(), ln)
	return n
}

// startNodeIn starts a node on the data dir dir (made on first use) serving on ln, and
// returns it and stop, which stops it (its data dir stays, to start again).
func startNodeIn(t *testing.T, dir string, ln net.Listener) (*testNode, func()) {
	t.Helper()
	return startNodeAt(t, dir, ln, "http://"+ln.Addr().String())
}

// startNodeAt is startNodeIn with the publicUrl pub (another spelling of ln's address).
func startNodeAt(t *testing.T, dir string, ln net.Listener, pub string) (*testNode, func()) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse([]byte(`{"pact": {"publicUrl": "`+pub+`", "audience": "`+pub+`", "allowInsecureLocalIssuers": true,
  "brands": [{"id": "review", "name": "Code review", "description": "Reviews code in my workspace.",
    "capability": "review", "workspace": "workspace", "accessMode": "read_only",
    "scope": {"id": "review:read_only", "description": "Review code (read only)"}}]}}`), dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(dir, "pact.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	key, err := keys.LoadOrCreate(filepath.Join(dir, "node-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cs := consent.New(db, key, consent.Config{PublicURL: pub, ConsentURL: consentURL, Interval: time.Second, Logger: quiet})
	ledger := receipts.NewLedger(db, key, pub, time.Now)
	t.Cleanup(func() { ledger.Close() })
	runner := &fakeRunner{}
	gw, err := gateway.New(gateway.Config{
		ConsentURL: consentURL,
		Identity:   identity.New(identity.Config{Audience: pub, NodeIssuer: pub, AllowInsecureLocalIssuers: true, Logger: quiet}),
		Consent:    cs, Tasks: db, Ledger: ledger, Keys: keys.History{Set: key.Set()}, Signer: key, Logger: quiet,
		Turns: turn.New(turn.Config{Ledger: ledger, Runner: runner, Consent: cs, Served: func() *policy.Policy { return pol }, Logger: quiet}),
	}, pol.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: gw.Handler()}
	go srv.Serve(ln)
	stop := func() { srv.Close(); ledger.Close(); db.Close() }
	t.Cleanup(stop)
	return &testNode{dir: dir, publicURL: pub, consent: cs, policy: pol, db: db, runner: runner, ledger: ledger}, stop
}

// owner answers the device flow like the node owner on the consent page.
func (n *testNode) owner(t *testing.T, allow bool) func(code, link string) {
	return func(code, link string) {
		if link != consentURL+"?user_code="+code {
			t.Errorf("verification link %q for code %s", link, code)
		}
		req, status, err := n.consent.Lookup(context.Background(), code)
		if err != nil || status != domain.FlowPending {
			t.Errorf("lookup %s: %v %s", code, err, status)
			return
		}
		if _, err := n.consent.Decide(context.Background(), req.ID, code, allow, consent.Day, n.policy); err != nil {
			t.Errorf("decide: %v", err)
		}
	}
}

func (n *testNode) options(t *testing.T, dir string, log io.Writer) Options {
	return Options{Card: n.publicURL, Brand: "review", Message: "Review main.go", Dir: dir, Subject: "alice",
		OnUserCode: n.owner(t, true), Log: log}
}

func TestRunConsentThenReuse(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	dir := t.TempDir()
	var log bytes.Buffer
	res, err := Run(context.Background(), n.options(t, dir, &log))
	if err != nil {
		t.Fatalf("first run: %v\n%s", err, log.String())
	}
	t.Logf("transcript:\n%s", log.String())
	if !res.Consented || res.Refreshed || res.AuthRequired == nil || res.AuthRequired.Reason != "missing" {
		t.Fatalf("first run: consented=%v refreshed=%v auth=%+v", res.Consented, res.Refreshed, res.AuthRequired)
	}
	if res.Task.Status.State != a2a.TaskStateCompleted || res.Answer != "Reviewed (read_only): looks good." {
		t.Fatalf("task %s answer %q", res.Task.Status.State, res.Answer)
	}
	// The turn ran on the task that asked for consent.
	if res.Task.ID != res.AuthRequired.ResumeTaskID {
		t.Fatalf("turn ran on task %s, not the AUTH_REQUIRED task %s", res.Task.ID, res.AuthRequired.ResumeTaskID)
	}
	r := res.Receipt
	if r == nil || r.Task != string(res.Task.ID) || r.Brand != "review" || r.Agent.Subject != "alice" || r.Agent.Issuer != res.Agent.Issuer || r.Status != "completed" {
		t.Fatalf("receipt = %+v", r)
	}
	for _, want := range []string{"Card: Code review (brand review)", "AUTH_REQUIRED (reason: missing)",
		"Ask the node owner to approve code", "Waiting for the owner", "signature verified with the node JWKS"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}

	// A second run from the same folder is the same agent with a saved token: no consent.
	again := n.options(t, dir, io.Discard)
	again.OnUserCode = func(string, string) { t.Error("the second run asked for consent") }
	res2, err := Run(context.Background(), again)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if res2.Consented || res2.Refreshed || res2.AuthRequired != nil || res2.Agent.Issuer != res.Agent.Issuer {
		t.Fatalf("second run: consented=%v refreshed=%v auth=%+v iss %s", res2.Consented, res2.Refreshed, res2.AuthRequired, res2.Agent.Issuer)
	}
	if res2.Receipt.Seq != r.Seq+1 || res2.Receipt.Grant != r.Grant {
		t.Fatalf("second receipt seq %d grant %s, want seq %d grant %s", res2.Receipt.Seq, res2.Receipt.Grant, r.Seq+1, r.Grant)
	}
}

func TestRunBindingsAndStreaming(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	for _, c := range []struct {
		binding a2a.TransportProtocol
		stream  bool
	}{
		{a2a.TransportProtocolJSONRPC, true},
		{a2a.TransportProtocolHTTPJSON, false},
		{a2a.TransportProtocolHTTPJSON, true},
	} {
		t.Run(fmt.Sprintf("%s stream=%v", c.binding, c.stream), func(t *testing.T) {
			t.Parallel()
			var log bytes.Buffer
			o := n.options(t, t.TempDir(), &log)
			o.Stream, o.Binding = c.stream, c.binding
			res, err := Run(context.Background(), o)
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			t.Logf("transcript:\n%s", log.String())
			if res.Interface.ProtocolBinding != c.binding || res.Receipt == nil || res.Answer == "" || !res.Consented {
				t.Fatalf("binding %s receipt %v answer %q consented %v", res.Interface.ProtocolBinding, res.Receipt, res.Answer, res.Consented)
			}
			streamed := []string{"[working] reading the workspace", "[artifact] answer", "[artifact] receipt", "[completed]"}
			for _, want := range streamed {
				if strings.Contains(log.String(), want) != c.stream {
					t.Errorf("log has %q: %v, want %v:\n%s", want, !c.stream, c.stream, log.String())
				}
			}
		})
	}
}

func TestRunRefreshesAnExpiredSavedToken(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	dir := t.TempDir()
	if _, err := Run(context.Background(), n.options(t, dir, io.Discard)); err != nil {
		t.Fatal(err)
	}
	// Age the saved token past its expiry.
	path := filepath.Join(dir, tokensFile)
	var f tokenFile
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &f); err != nil || len(f.Tokens) != 1 {
		t.Fatalf("saved tokens %s: %v", data, err)
	}
	f.Tokens[0].ExpiresAt = time.Now().Add(-time.Minute)
	data, _ = json.Marshal(f)
	os.WriteFile(path, data, 0o600)

	o := n.options(t, dir, io.Discard)
	o.OnUserCode = func(string, string) { t.Error("asked the owner although the grant is live") }
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Refreshed || res.Consented || res.AuthRequired != nil {
		t.Fatalf("refreshed=%v consented=%v auth=%+v", res.Refreshed, res.Consented, res.AuthRequired)
	}
}

func TestRunAfterTheGrantIsRevoked(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	dir := t.TempDir()
	first, err := Run(context.Background(), n.options(t, dir, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("V1 revoked grant asks the owner again", func(t *testing.T) {
		if _, err := n.consent.Revoke(context.Background(), domain.GrantID(first.Receipt.Grant)); err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), n.options(t, dir, io.Discard))
		if err != nil {
			t.Fatal(err)
		}
		if res.AuthRequired == nil || res.AuthRequired.Reason != "revoked" || !res.Consented || res.Refreshed {
			t.Fatalf("auth=%+v consented=%v refreshed=%v", res.AuthRequired, res.Consented, res.Refreshed)
		}
		if res.Receipt.Grant == first.Receipt.Grant {
			t.Fatal("the turn ran on the revoked grant")
		}
	})
}

func TestRunEndings(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	t.Run("D7 owner denies", func(t *testing.T) {
		o := n.options(t, t.TempDir(), io.Discard)
		o.OnUserCode = n.owner(t, false)
		res, err := Run(context.Background(), o)
		if runs := n.runner.count(); !errors.Is(err, ErrDenied) || res.AuthRequired == nil || runs != 0 {
			t.Fatalf("err = %v, auth %+v, runs %d; want ErrDenied and no work", err, res.AuthRequired, runs)
		}
	})
	t.Run("failed turn has a verified receipt", func(t *testing.T) {
		n.runner.mu.Lock()
		n.runner.fail = "codex is not signed in"
		n.runner.mu.Unlock()
		defer func() { n.runner.mu.Lock(); n.runner.fail = ""; n.runner.mu.Unlock() }()
		res, err := Run(context.Background(), n.options(t, t.TempDir(), io.Discard))
		var te *TurnError
		if !errors.As(err, &te) || te.State != a2a.TaskStateFailed || !strings.Contains(te.Reason, "codex is not signed in") {
			t.Fatalf("err = %v, want a failed TurnError with the reason", err)
		}
		if res.Receipt == nil || res.Receipt.Status != "failed" {
			t.Fatalf("receipt %+v", res.Receipt)
		}
	})
	t.Run("waiting task rejected meanwhile: a new task", func(t *testing.T) {
		o := n.options(t, t.TempDir(), io.Discard)
		approve := o.OnUserCode
		var iss string
		o.OnUserCode = func(code, link string) {
			// Another request of this agent was denied: the node ends its waiting tasks.
			req, _, _ := n.consent.Lookup(context.Background(), code)
			iss = req.Agent.Issuer
			owner := req.Agent.Key()
			if ids, err := n.db.RejectAuthRequired(context.Background(), owner, "review", "denied elsewhere"); err != nil || len(ids) != 1 {
				t.Errorf("reject waiting tasks: %v %v", ids, err)
			}
			approve(code, link)
		}
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Task.ID == res.AuthRequired.ResumeTaskID || res.Receipt.Task != string(res.Task.ID) || res.Agent.Issuer != iss {
			t.Fatalf("turn ran on task %s (waiting task %s), receipt task %s", res.Task.ID, res.AuthRequired.ResumeTaskID, res.Receipt.Task)
		}
	})
	t.Run("J23 identity for another audience", func(t *testing.T) {
		o := n.options(t, t.TempDir(), io.Discard)
		o.Audience = "https://another-node.example"
		_, err := Run(context.Background(), o)
		var rej *IdentityRejectedError
		if !errors.As(err, &rej) || rej.Description == "" {
			t.Fatalf("err = %v, want IdentityRejectedError with the node's reason", err)
		}
	})
	t.Run("external identity token", func(t *testing.T) {
		li := openIssuer(t, t.TempDir(), IssuerOptions{})
		tok, err := li.Mint("carol", n.publicURL)
		if err != nil {
			t.Fatal(err)
		}
		o := n.options(t, t.TempDir(), io.Discard)
		o.IdentityToken = tok
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Agent.Subject != "carol" || res.Receipt.Agent.Subject != "carol" || res.Receipt.Agent.Issuer != li.URL() {
			t.Fatalf("agent %+v receipt agent %+v", res.Agent, res.Receipt.Agent)
		}
	})
}

// StartNodeForCLITest starts a test node for the CLI test (package
// agent_test). It returns the node's publicUrl and decide, which waits for
// the next pending consent request and allows or denies it.
func StartNodeForCLITest(t *testing.T) (publicURL string, decide func(ctx context.Context, allow bool) error) {
	n := startNode(t)
	return n.publicURL, func(ctx context.Context, allow bool) error {
		for {
			reqs, err := n.consent.Pending(ctx)
			if err != nil {
				return err
			}
			if len(reqs) > 0 {
				_, err := n.consent.Decide(ctx, reqs[0].ID, reqs[0].UserCode, allow, consent.Day, n.policy)
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}
