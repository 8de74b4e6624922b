package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codex/mockmodel"
	"github.com/aether/aether/backend/domain"
	aimodel "github.com/aether/aether/backend/model"
	"github.com/aether/aether/backend/receipts"
)

// TestPactRealCodex runs a whole PACT turn through the real `codex exec`, the
// node's model gateway and a local mock of the OpenAI Responses API set as the
// owner's server: the answer the mock scripts comes back through the gateway
// with a receipt, under the read-only sandbox, and the receipt's usage is what
// the mock reported. It keeps the fake Codex honest. CI installs the real CLI
// (scripts/install-codex.sh) and sets AETHER_REAL_CODEX.
func TestPactRealCodex(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("AETHER_REAL_CODEX")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("codex"); err != nil {
			t.Skip("no real codex: set AETHER_REAL_CODEX=$(scripts/install-codex.sh)")
		}
	}
	model := mockmodel.New(
		mockmodel.Shell("echo pwned > pwned.txt; cat main.go"),
		mockmodel.Message("main.go declares an empty main; nothing to fix."),
	)
	defer model.Close()
	home := codextest.Home(t) // not under /tmp: codex's Linux sandbox cannot start from there

	e := newEnv(t, withCodexPath(bin), withCodexEnv("CODEX_API_KEY=dummy"))
	e.stop()
	e.opts.CodexHome = home
	const ownerKey = "sk-e2e-owner-9c4d1f"
	store := &aimodel.Store{Dir: e.dataDir}
	if _, err := store.Update(func(s *aimodel.Settings) { s.BaseURL = model.BaseURL() }); err != nil {
		t.Fatal(err)
	}
	if err := store.SetKey(ownerKey); err != nil {
		t.Fatal(err)
	}
	e.start()

	alice := e.agent("alice")
	alice.setDelegation(e.delegate(t, alice, "review"))
	c := alice.client("review", a2a.TransportProtocolJSONRPC)
	task := alice.send(c, "", "Review main.go please")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("turn ended %s: %s", task.Status.State, statusText(task))
	}
	answer, rec := artifacts(t, task)
	if answer != "main.go declares an empty main; nothing to fix." {
		t.Fatalf("answer %q", answer)
	}
	claims, err := receipts.VerifyOne(rec, nodeJWKS(t, e))
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	// The receipt signs what the turn did (docs/wire.md, "What the turn did"): the one
	// command, and no change to the read-only workspace.
	w := claims.Work
	if claims.V != receipts.Version || w == nil || w.Commands.Count != 1 || w.Sandbox != "read-only" || w.Files.Count != 0 || w.Before != w.After {
		t.Fatalf("receipt v %d, work %+v", claims.V, w)
	}
	if line := w.Commands.Items[0].Line; line != "/bin/bash -c 'echo pwned > pwned.txt; cat main.go'" {
		t.Fatalf("command %q", line)
	}
	reqs := model.Requests()
	for i, r := range reqs {
		if got := r.Header.Get("Authorization"); got != "Bearer "+ownerKey {
			t.Errorf("request %d reached the model with %q, not the owner's key", i, got)
		}
	}
	// The gateway's count: the mock reports 10 in and 5 out per request.
	if want := (domain.Usage{InputTokens: 10 * int64(len(reqs)), OutputTokens: 5 * int64(len(reqs))}); claims.Usage != want {
		t.Errorf("receipt usage %+v, want %+v", claims.Usage, want)
	}
	if len(reqs) == 0 || reqs[0].TurnMetadata()["sandbox_mode"] != "read-only" {
		t.Fatalf("codex did not run read-only: %d requests", len(reqs))
	}
	if _, err := os.Stat(filepath.Join(e.workspace, "pwned.txt")); !os.IsNotExist(err) {
		t.Fatal("the read-only sandbox let a write into the workspace")
	}
}

// TestPactRealCodexBudget: a brand's budget of model tokens a day, counted by the node's
// gateway from what the model reported: the turn that crosses it fails, saying so in its
// status and receipt; the grant's next turn is refused before Codex starts.
func TestPactRealCodexBudget(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("AETHER_REAL_CODEX")
	if bin == "" {
		t.Skip("no real codex: set AETHER_REAL_CODEX=$(scripts/install-codex.sh)")
	}
	model := mockmodel.New(mockmodel.Shell("cat main.go"), mockmodel.Message("done")) // 15 tokens a request
	defer model.Close()
	brand := strings.Replace(reviewBrand, `"accessMode"`, `"tokensPerDay":20,"accessMode"`, 1)
	e := newEnv(t, withCodexPath(bin), withCodexEnv("CODEX_API_KEY=dummy"), withBrands(brand))
	e.stop()
	e.opts.CodexHome = codextest.Home(t)
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	e.opts.UI = os.DirFS(filepath.Join(root, "frontend", "dist"))
	if _, err := (&aimodel.Store{Dir: e.dataDir}).Update(func(s *aimodel.Settings) { s.BaseURL = model.BaseURL() }); err != nil {
		t.Fatal(err)
	}
	e.start()
	alice := e.agent("alice")
	alice.setDelegation(e.delegate(t, alice, "review"))
	c := alice.client("review", a2a.TransportProtocolJSONRPC)

	t.Run("M9 the turn that crosses the budget ends failed", func(t *testing.T) {
		task := alice.send(c, "", "Review main.go please")
		claims := receiptClaims(t, e, task)
		if task.Status.State != a2a.TaskStateFailed || !strings.Contains(statusText(task), "budget_exhausted") ||
			claims.Status != "failed" || !strings.Contains(claims.Reason, "budget_exhausted") {
			t.Fatalf("turn ended %s: %q; receipt %s %q", task.Status.State, statusText(task), claims.Status, claims.Reason)
		}
		if claims.Usage.InputTokens != 20 || claims.Usage.OutputTokens != 10 {
			t.Errorf("receipt usage %+v, want the model's 2×(10 in, 5 out)", claims.Usage)
		}
	})
	t.Run("M9 the next turn of the spent grant is refused before Codex starts", func(t *testing.T) {
		before := len(model.Requests())
		task := alice.send(c, "", "Review main.go again")
		claims := receiptClaims(t, e, task)
		if task.Status.State != a2a.TaskStateFailed || !strings.Contains(statusText(task), "budget_exhausted: this grant has used 30 of its 20 tokens") ||
			!strings.Contains(claims.Reason, "budget_exhausted") {
			t.Fatalf("turn ended %s: %q; receipt %q", task.Status.State, statusText(task), claims.Reason)
		}
		if n := len(model.Requests()); n != before {
			t.Errorf("the model was asked %d more times", n-before)
		}
	})
	t.Run("the Sharing page shows the grant's use against its budget", func(t *testing.T) {
		gs, err := e.n.Owner().Grants(context.Background())
		if err != nil || len(gs) != 1 || gs[0].TokensToday != 30 || gs[0].TokensPerDay != 20 {
			t.Fatalf("grants %+v %v", gs, err)
		}
		root := browserRoot(t)
		o := startOwner(t, e, root)
		browse[map[string]any](t, o, "signin", map[string]any{"link": e.n.SignInURL()})
		got := browse[struct{ Rows []struct{ ID, Text string } }](t, o, "sharing", map[string]any{"shot": "sharing-budget.png", "wait": gs[0].ID})
		if len(got.Rows) != 1 || !strings.Contains(got.Rows[0].Text, "30 of 20") {
			t.Errorf("the Sharing page's row: %+v", got.Rows)
		}
	})
	t.Run("M10 a restart does not give the spent grant its budget back", func(t *testing.T) {
		e.restart()
		before := len(model.Requests())
		task := alice.send(alice.client("review", a2a.TransportProtocolJSONRPC), "", "Review main.go after the restart")
		claims := receiptClaims(t, e, task)
		if task.Status.State != a2a.TaskStateFailed || !strings.Contains(statusText(task), "budget_exhausted: this grant has used 30 of its 20 tokens") ||
			!strings.Contains(claims.Reason, "budget_exhausted") {
			t.Fatalf("turn ended %s: %q; receipt %q", task.Status.State, statusText(task), claims.Reason)
		}
		if n := len(model.Requests()); n != before {
			t.Errorf("the model was asked %d more times", n-before)
		}
	})
	t.Run("the owner's no limit at approval stands over the brand's budget", func(t *testing.T) {
		bob := e.agent("bob")
		code, start := bob.oauthForm(e.publicURL+"/pact/device_authorization", map[string][]string{"scope": {"review:read_only"}, "brand": {"review"}})
		if code != 200 {
			t.Fatalf("device authorization: %d %v", code, start)
		}
		o := startOwner(t, e, browserRoot(t))
		browse[map[string]any](t, o, "signin", map[string]any{"link": e.n.SignInURL()})
		got := browse[struct {
			outcome
			BudgetShown string
		}](t, o, "decide", map[string]any{"userCode": start["user_code"], "decision": "allow",
			"tokensPerDay": "", "shot": "consent-budget.png"})
		if got.BudgetShown != "20" || got.GrantID == "" {
			t.Fatalf("the approval offered %q tokens a day (want the brand's 20): %+v", got.BudgetShown, got)
		}
		code, tok := bob.oauthForm(e.publicURL+"/pact/token", map[string][]string{
			"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {start["device_code"].(string)}})
		if code != 200 {
			t.Fatalf("token: %d %v", code, tok)
		}
		bob.setDelegation(tok["access_token"].(string))
		c := bob.client("review", a2a.TransportProtocolJSONRPC)
		for i := range 2 { // 15 tokens each: the brand's 20 would end the second
			if task := bob.send(c, "", "Review main.go"); task.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("bob's turn %d ended %s: %q", i+1, task.Status.State, statusText(task))
			}
		}
		gs, err := e.n.Owner().Grants(context.Background())
		if err != nil || len(gs) != 2 || gs[0].TokensToday != 30 || gs[0].TokensPerDay != 0 {
			t.Fatalf("grants %+v %v", gs, err)
		}
	})
}
