package gateway

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/cardjson"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/policy"
)

func testBrand() policy.Brand {
	return policy.Brand{ID: "acme", Name: "Acme", Description: "Acme's agent", Capability: "code", AccessMode: "read",
		Scope: policy.Scope{ID: "acme.read", Description: "read"}}
}

// The card the gateway serves carries a JWS over its canonical form that the
// node JWKS verifies, and a changed field breaks it.
func TestCardSignature(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key := keys.FromPrivate(priv)
	g := &Gateway{cfg: Config{Signer: key}}
	_, h, err := g.signedCard(newURLs("https://node.example"), testBrand(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/a2a/acme/.well-known/agent-card.json", nil))
	body := rec.Body.Bytes()
	var card a2a.AgentCard
	if err := cardjson.Unmarshal(body, &card); err != nil || len(card.Signatures) != 1 {
		t.Fatalf("card %s: %v", body, err)
	}
	// A2A 1.0's StringList form of the scopes, which a2a-go's own decoder
	// does not read (docs/wire.md, "Agent cards").
	var served struct {
		SecurityRequirements []struct{ Schemes map[string]json.RawMessage } `json:"securityRequirements"`
		Skills               []struct {
			SecurityRequirements []struct{ Schemes map[string]json.RawMessage } `json:"securityRequirements"`
		} `json:"skills"`
	}
	if err := json.Unmarshal(body, &served); err != nil || len(served.Skills) != 1 || len(served.SecurityRequirements) != 1 || len(served.Skills[0].SecurityRequirements) != 1 {
		t.Fatalf("card %s: %v", body, err)
	}
	if got := string(served.SecurityRequirements[0].Schemes[SchemeAgent]); got != `{}` {
		t.Errorf("card requirement %s = %s, want {}", SchemeAgent, got)
	}
	skill := served.Skills[0].SecurityRequirements[0].Schemes
	if string(skill[SchemeAgent]) != `{}` || string(skill[SchemeDelegation]) != `{"list":["acme.read"]}` {
		t.Errorf("skill requirement %s %s, want {} and {\"list\":[\"acme.read\"]}", skill[SchemeAgent], skill[SchemeDelegation])
	}
	if err := json.Unmarshal(body, new(a2a.AgentCard)); err == nil {
		t.Error("a2a-go's decoder read the served card: it is not in the StringList form")
	}
	if err := key.Set().VerifyCard(body); err != nil {
		t.Fatalf("verify the served card: %v", err)
	}
	tampered := strings.Replace(string(body), `"name":"Acme"`, `"name":"Evil"`, 1)
	if tampered == string(body) {
		t.Fatal("no name to tamper with")
	}
	if err := key.Set().VerifyCard([]byte(tampered)); err == nil {
		t.Error("a tampered card verified")
	}
}

func TestCardConditionalRequests(t *testing.T) {
	mod := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	s, err := newStaticJSON(map[string]string{"a": "b"}, "300", mod.Add(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	get := func(h map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/card", nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	first := get(nil)
	if first.Code != 200 || first.Header().Get("Last-Modified") != mod.Format(http.TimeFormat) || first.Header().Get("ETag") == "" {
		t.Fatalf("first GET: %d %v", first.Code, first.Header())
	}
	etag := first.Header().Get("ETag")
	lm := first.Header().Get("Last-Modified")
	earlier := mod.Add(-time.Hour).Format(http.TimeFormat)
	for _, c := range []struct {
		name string
		h    map[string]string
		want int
	}{
		{"If-None-Match matches", map[string]string{"If-None-Match": etag}, 304},
		{"If-None-Match weak and listed", map[string]string{"If-None-Match": `"x", W/` + etag}, 304},
		{"If-None-Match differs", map[string]string{"If-None-Match": `"other"`}, 200},
		{"If-Modified-Since equal", map[string]string{"If-Modified-Since": lm}, 304},
		{"If-Modified-Since later", map[string]string{"If-Modified-Since": mod.Add(time.Hour).Format(http.TimeFormat)}, 304},
		{"If-Modified-Since earlier", map[string]string{"If-Modified-Since": earlier}, 200},
		{"If-Modified-Since unparsable", map[string]string{"If-Modified-Since": "yesterday"}, 200},
		// RFC 9110 §13.2.2: If-None-Match is evaluated and If-Modified-Since ignored.
		{"If-None-Match differs wins over If-Modified-Since", map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": lm}, 200},
		{"If-None-Match matches wins over If-Modified-Since", map[string]string{"If-None-Match": etag, "If-Modified-Since": earlier}, 304},
	} {
		rec := get(c.h)
		if rec.Code != c.want {
			t.Errorf("%s: %d, want %d", c.name, rec.Code, c.want)
		}
		if rec.Code == 304 && (rec.Body.Len() != 0 || rec.Header().Get("ETag") != etag || rec.Header().Get("Last-Modified") != lm) {
			t.Errorf("%s: 304 with body %q, headers %v", c.name, rec.Body, rec.Header())
		}
	}
}
