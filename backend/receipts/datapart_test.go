package receipts

import (
	"reflect"
	"strings"
	"testing"

	"github.com/aether/aether/backend/domain"
)

// The data part is the signed claims with camelCase names and nothing else
// changed: the same values, the registered JWT names as they are.
func TestDataPart(t *testing.T) {
	c := Claims{RID: "r_1", Seq: 3, Task: "task-1", Brand: "acme", Scope: "acme.read", PactScope: "pact",
		Agent: domain.Agent{Issuer: "https://agent.example", Subject: "alice"}, Status: domain.TurnCompleted,
		Usage: domain.Usage{InputTokens: 100, CachedInputTokens: 20, OutputTokens: 7}, GrantRevoked: true}
	c.Issuer, c.ID = testIssuer, "r_1"
	jws := signedBy(t, testKey(1), c)
	got, err := DataPart(jws)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"pactScope": "pact", "grantRevoked": true, "iss": testIssuer, "jti": "r_1", "seq": 3.0,
		"usage": map[string]any{"inputTokens": 100.0, "cachedInputTokens": 20.0, "outputTokens": 7.0},
		"agent": map[string]any{"iss": "https://agent.example", "sub": "alice"}}
	for k, v := range want {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("data part %s = %#v, want %#v", k, got[k], v)
		}
	}
	if name := snakeName(got); name != "" {
		t.Errorf("a snake_case name is left: %s", name)
	}
	// The signed claims themselves keep their names (old receipts read the same).
	payload, _ := jwsPart(jws, 1)
	for _, name := range []string{`"pact_scope":"pact"`, `"grant_revoked":true`, `"input_tokens":100`} {
		if !strings.Contains(string(payload), name) {
			t.Errorf("signed claims lack %s: %s", name, payload)
		}
	}
}

func snakeName(v any) string {
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			if strings.Contains(k, "_") {
				return k
			}
			if n := snakeName(x); n != "" {
				return k + "." + n
			}
		}
	}
	return ""
}

func TestDataPartRefusesNamesThatMeet(t *testing.T) {
	c := Claims{RID: "r_1", PactScope: "pact"}
	jws := signedBy(t, testKey(1), c)
	parts := strings.Split(jws, ".")
	// Not a receipt the node signs; DataPart refuses to pick one of the two.
	payload := `{"pact_scope":"pact","pactScope":"other"}`
	forged := parts[0] + "." + b64(payload) + "." + parts[2]
	if _, err := DataPart(forged); err == nil || !strings.Contains(err.Error(), "pactScope") {
		t.Errorf("two names meeting in camelCase: %v", err)
	}
}
