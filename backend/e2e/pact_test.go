package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"golang.org/x/oauth2"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
)

// TestPact is the product page's flow end to end, with the fake Codex:
// card → a turn without delegation gets AUTH_REQUIRED with the consent link
// and no work runs → device flow → the owner allows → the delegated turn
// returns Codex's answer with a receipt that verifies with the node JWKS →
// the receipt is in pact.sqlite.
func TestPact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	// The card, as any agent reads it.
	raw := getJSON(t, e.publicURL+"/a2a/review/.well-known/agent-card.json")
	if _, ok := raw["provider"]; ok {
		t.Error("the card has a provider")
	}
	// Security requirements in A2A 1.0's StringList form (which a2a-go's
	// decoder cannot read; e.card and the a2a-go client below go through
	// cardjson, as aether agent does).
	skillReq := fmt.Sprint(raw["skills"].([]any)[0].(map[string]any)["securityRequirements"])
	if want := "[map[schemes:map[pactAgent:map[] pactDelegation:map[list:[review:read_only]]]]]"; skillReq != want {
		t.Errorf("skill securityRequirements %s, want %s", skillReq, want)
	}
	if got := fmt.Sprint(raw["securityRequirements"]); got != "[map[schemes:map[pactAgent:map[]]]]" {
		t.Errorf("card securityRequirements %s", got)
	}
	card := e.card("review")
	if card.Name != "Code review" || card.Version == "" || !card.Capabilities.Streaming {
		t.Errorf("card: name %q version %q streaming %v", card.Name, card.Version, card.Capabilities.Streaming)
	}
	if got := card.SupportedInterfaces; len(got) != 2 || got[0].ProtocolBinding != a2a.TransportProtocolJSONRPC ||
		got[1].ProtocolBinding != a2a.TransportProtocolHTTPJSON || got[0].URL != e.publicURL+"/a2a/review" || got[0].ProtocolVersion != "1.0" {
		t.Errorf("supportedInterfaces = %+v", got)
	}
	single := getJSON(t, e.publicURL+"/.well-known/agent-card.json")
	if single["name"] != "Code review" {
		t.Errorf("the single-brand card at the root is %v", single["name"])
	}

	// A turn without a delegation token: AUTH_REQUIRED, and no work runs.
	alice := e.agent("alice")
	c := alice.client("review", a2a.TransportProtocolJSONRPC)
	task := alice.send(c, "", "Review main.go please")
	data := authData(t, task)
	wantConsent := "https://" + e.n.Addresses().Admin + "/pact/consent"
	for k, want := range map[string]any{
		"reason": "missing", "consentUrl": wantConsent, "deviceAuthorizationUrl": e.publicURL + "/pact/device_authorization",
		"tokenUrl": e.publicURL + "/pact/token", "scope": "review:read_only", "credentialHeader": "PACT-Delegation", "resumeTaskId": string(task.ID),
	} {
		if data[k] != want {
			t.Errorf("AUTH_REQUIRED data %s = %v, want %v", k, data[k], want)
		}
	}
	if n := e.codexRuns(); n != 0 {
		t.Fatalf("codex ran %d times before consent", n)
	}
	if _, err := os.Stat(e.record); !os.IsNotExist(err) {
		t.Fatal("the coding agent was started before consent")
	}

	// The device flow, with golang.org/x/oauth2 as the agent's client.
	oc := &oauth2.Config{ClientID: "alice-agent", Scopes: []string{"review:read_only"},
		Endpoint: oauth2.Endpoint{DeviceAuthURL: data["deviceAuthorizationUrl"].(string), TokenURL: data["tokenUrl"].(string)}}
	octx := context.WithValue(ctx, oauth2.HTTPClient, alice.httpClient())
	da, err := oc.DeviceAuth(octx)
	if err != nil {
		t.Fatalf("device authorization: %v", err)
	}
	if da.VerificationURI != wantConsent || da.VerificationURIComplete != wantConsent+"?user_code="+da.UserCode {
		t.Errorf("verification URIs %q %q", da.VerificationURI, da.VerificationURIComplete)
	}
	// The owner allows on the consent page's API while the agent polls.
	go func() {
		if code, out := e.admin.decide(da.UserCode, "allow"); code != 200 {
			t.Errorf("allow: %d %v", code, out)
		}
	}()
	tok, err := oc.DeviceAccessToken(octx, da)
	if err != nil {
		t.Fatalf("device access token: %v", err)
	}
	alice.setDelegation(tok.AccessToken)

	// The delegated turn on the same task.
	done := alice.send(c, task.ID, "Review main.go please")
	if done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("delegated turn ended %s: %v", done.Status.State, statusText(done))
	}
	answer, rec := artifacts(t, done)
	if answer != codextest.DefaultAnswer {
		t.Errorf("answer %q", answer)
	}
	set := nodeJWKS(t, e)
	claims, err := receipts.VerifyOne(rec, set)
	if err != nil {
		t.Fatalf("receipt does not verify with the node JWKS: %v", err)
	}
	if claims.Task != string(task.ID) || claims.Brand != "review" || claims.Scope != "review:read_only" || claims.PactScope != "pact" ||
		claims.Agent.Issuer != e.issuer.URL || claims.Agent.Subject != "alice" || claims.Status != "completed" || claims.Ans != receipts.HashBytes([]byte(answer)) {
		t.Errorf("receipt claims %+v", claims)
	}
	// Beside it, its tlog-proof in the node's receipts log, against a checkpoint the node key signed.
	var proof string
	for _, a := range done.Artifacts {
		for _, p := range a.Parts {
			if a.Name == "receipt" && strings.HasPrefix(p.Text(), receipts.ProofHeader) && p.Filename == "receipt.tlog-proof" {
				proof = p.Text()
			}
		}
	}
	if cp, err := receipts.VerifyProof(proof, rec, claims.Seq, set.Set); err != nil || cp.Size != claims.Seq {
		t.Errorf("the receipt's tlog-proof: %+v %v", cp, err)
	}

	// Codex ran read-only in the brand's workspace and nothing dangerous.
	runs := codextest.ReadRecords(t, e.record)
	if len(runs) == 0 {
		t.Fatal("no codex run recorded")
	}
	ws, _ := filepath.EvalSymlinks(e.workspace)
	if r := runs[0]; r.Sandbox != "read-only" || r.Cd != ws || strings.Contains(strings.Join(r.Argv, " "), "dangerously") {
		t.Errorf("codex ran with sandbox %q cd %q argv %q", r.Sandbox, r.Cd, r.Argv)
	}

	// The receipt is in pact.sqlite, committed, and the chain verifies.
	e.stop()
	db, err := store.Open(filepath.Join(e.dataDir, "pact.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored, err := db.GetReceipt(ctx, claims.RID)
	if err != nil {
		t.Fatalf("receipt %s not in pact.sqlite: %v", claims.RID, err)
	}
	if stored.JWS != rec {
		t.Error("the stored receipt differs from the one returned")
	}
	rep, err := receipts.VerifyDB(ctx, db, set, receipts.VerifyOptions{})
	if err != nil || !rep.OK || rep.Count != 1 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

func getJSON(t *testing.T, u string) map[string]any {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return m
}

// nodeJWKS is the node's JWKS, each retired key with the rotation that bounds it.
func nodeJWKS(t *testing.T, e *env) keys.History {
	t.Helper()
	resp, err := http.Get(e.publicURL + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	h, err := keys.ParseHistory(body)
	if err != nil {
		t.Fatalf("node JWKS: %v", err)
	}
	return h
}

// artifacts returns the answer text and the receipt JWS of a finished task.
func artifacts(t *testing.T, task *a2a.Task) (answer, receipt string) {
	t.Helper()
	for _, a := range task.Artifacts {
		switch a.Name {
		case "answer":
			answer = a.Parts[0].Text()
		case "receipt":
			for _, p := range a.Parts {
				if s := p.Text(); s != "" && !strings.HasPrefix(s, receipts.ProofHeader) { // the JWS, not its tlog-proof
					receipt = s
				}
			}
		}
	}
	if receipt == "" {
		t.Fatalf("no receipt artifact in %d artifacts", len(task.Artifacts))
	}
	return answer, receipt
}

func statusText(task *a2a.Task) string {
	if task.Status.Message == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range task.Status.Message.Parts {
		b.WriteString(p.Text())
	}
	return b.String()
}
