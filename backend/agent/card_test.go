package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/cardjson"
)

// pactCard is a card shaped like the gateway's (docs/wire.md, "Agent cards").
func pactCard(publicURL, brand, scope string) *a2a.AgentCard {
	endpoint := publicURL + "/a2a/" + brand
	return &a2a.AgentCard{
		Name: "Code review", Description: "Reviews code in my workspace.", Version: "1.0.0+abc",
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: endpoint, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
			{URL: endpoint, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2a.Version},
		},
		Capabilities: a2a.AgentCapabilities{Streaming: true, Extensions: []a2a.AgentExtension{{
			URI: "urn:pact:extension:delegation:v1", Params: map[string]any{"header": DelegationHeader, "scope": scope},
		}}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		SecuritySchemes: a2a.NamedSecuritySchemes{
			"pactAgent": a2a.HTTPAuthSecurityScheme{Scheme: "bearer", BearerFormat: "JWT"},
			SchemeDelegation: a2a.OAuth2SecurityScheme{
				Flows: a2a.DeviceCodeOAuthFlow{
					DeviceAuthorizationURL: publicURL + "/pact/device_authorization",
					TokenURL:               publicURL + "/pact/token",
					Scopes:                 map[string]string{scope: "Review code (read only)"},
				},
				Oauth2MetadataURL: publicURL + "/.well-known/oauth-authorization-server",
			},
		},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"pactAgent": a2a.SecuritySchemeScopes{}}},
		Skills: []a2a.AgentSkill{{ID: brand, Name: "Code review", Tags: []string{"review"},
			SecurityRequirements: a2a.SecurityRequirementsOptions{{
				"pactAgent": a2a.SecuritySchemeScopes{}, SchemeDelegation: a2a.SecuritySchemeScopes{scope},
			}}}},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCardURL(t *testing.T) {
	for _, c := range []struct{ target, brand, want string }{
		{"https://n.example/a2a/review/.well-known/agent-card.json", "", "https://n.example/a2a/review/.well-known/agent-card.json"},
		{"https://n.example/a2a/review/.well-known/agent-card.json", "other", "https://n.example/a2a/review/.well-known/agent-card.json"},
		{"https://n.example", "review", "https://n.example/a2a/review/.well-known/agent-card.json"},
		{"https://n.example/", "review", "https://n.example/a2a/review/.well-known/agent-card.json"},
		{"https://n.example/base/", "", "https://n.example/base/.well-known/agent-card.json"},
		{"http://127.0.0.1:8080", "", "http://127.0.0.1:8080/.well-known/agent-card.json"},
	} {
		got, err := CardURL(c.target, c.brand)
		if err != nil || got != c.want {
			t.Errorf("CardURL(%q, %q) = %q, %v; want %q", c.target, c.brand, got, err, c.want)
		}
	}
	for _, c := range [][2]string{{"n.example", ""}, {"ftp://n.example", "x"}, {"https://n.example", "a/b"}} {
		if _, err := CardURL(c[0], c[1]); err == nil {
			t.Errorf("CardURL(%q, %q) accepted", c[0], c[1])
		}
	}
}

func TestParseCardFindsWhatPACTNeeds(t *testing.T) {
	const pub = "https://aether.example.com"
	cardURL := pub + "/a2a/review/.well-known/agent-card.json"
	card, err := ParseCard(mustJSON(t, pactCard(pub, "review", "review:read_only")), cardURL)
	if err != nil {
		t.Fatal(err)
	}
	if card.Brand != "review" || card.PublicURL != pub || card.Scope != "review:read_only" || card.Name != "Code review" {
		t.Fatalf("card = brand %q public %q scope %q name %q", card.Brand, card.PublicURL, card.Scope, card.Name)
	}
	if card.DeviceAuthorizationURL != pub+"/pact/device_authorization" || card.TokenURL != pub+"/pact/token" {
		t.Fatalf("device flow URLs %q %q", card.DeviceAuthorizationURL, card.TokenURL)
	}
	for _, b := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
		in, err := card.Interface(b)
		if err != nil || in.ProtocolBinding != b || in.URL != pub+"/a2a/review" {
			t.Errorf("Interface(%s) = %+v, %v", b, in, err)
		}
	}
	if _, err := card.Interface(a2a.TransportProtocolGRPC); err == nil || !strings.Contains(err.Error(), "JSONRPC 1.0") {
		t.Errorf("Interface(GRPC) err = %v, want one listing what the card offers", err)
	}
}

// The scope comes from the skill's security requirement in both encodings:
// A2A 1.0's StringList, which the node serves, and a2a-go's bare arrays. The
// device flow names two scopes, so only the requirement can decide.
func TestParseCardReadsBothRequirementForms(t *testing.T) {
	const pub = "https://aether.example.com"
	ac := pactCard(pub, "review", "review:read_only")
	flow := ac.SecuritySchemes[SchemeDelegation].(a2a.OAuth2SecurityScheme)
	df := flow.Flows.(a2a.DeviceCodeOAuthFlow)
	df.Scopes = map[string]string{"review:read_only": "read", "other:scope": "other"}
	flow.Flows = df
	ac.SecuritySchemes[SchemeDelegation] = flow
	spec, err := cardjson.Marshal(ac)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(spec), `{"list":["review:read_only"]}`) {
		t.Fatalf("not the spec form: %s", spec)
	}
	for name, body := range map[string][]byte{"StringList": spec, "a2a-go arrays": mustJSON(t, ac)} {
		card, err := ParseCard(body, pub+"/a2a/review/.well-known/agent-card.json")
		if err != nil || card.Scope != "review:read_only" {
			t.Errorf("%s: scope %v, %v", name, card, err)
		}
	}
}

// The JWKS that verifies a card is below the card URL, whatever the card's
// interfaces say (docs/threats.md R17).
func TestKeysURLFollowsTheCardURL(t *testing.T) {
	ac := pactCard("https://evil.example", "review", "review:read_only")
	for cardURL, want := range map[string]string{
		"https://n.example/a2a/review/.well-known/agent-card.json":        "https://n.example/.well-known/jwks.json",
		"https://n.example/aether/a2a/review/.well-known/agent-card.json": "https://n.example/aether/.well-known/jwks.json",
		"https://n.example/aether/.well-known/agent-card.json":            "https://n.example/aether/.well-known/jwks.json",
		"http://127.0.0.1:8080/.well-known/agent-card.json":               "http://127.0.0.1:8080/.well-known/jwks.json",
		"https://n.example/cards/agent-card.json?x=1":                     "https://n.example/.well-known/jwks.json",
		"https://n.example/a2a/a/b/.well-known/agent-card.json":           "https://n.example/a2a/a/b/.well-known/jwks.json",
	} {
		card, err := ParseCard(mustJSON(t, ac), cardURL)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := card.KeysURL(); err != nil || got != want {
			t.Errorf("KeysURL for %s = %q, %v; want %s", cardURL, got, err, want)
		}
	}
}

func TestParseCardFallbacks(t *testing.T) {
	// A card served from the node's single-brand root URL, reached on the
	// gateway address while publicUrl is the proxy's: the interfaces decide.
	ac := pactCard("https://aether.example.com", "review", "review:read_only")
	card, err := ParseCard(mustJSON(t, ac), "http://127.0.0.1:8080/.well-known/agent-card.json")
	if err != nil || card.PublicURL != "https://aether.example.com" || card.Brand != "review" {
		t.Fatalf("card = %+v, %v", card, err)
	}

	// A non-Aether card: brand from the only skill, scope from the scheme's only scope.
	ac = pactCard("https://other.example", "x", "s:1")
	for _, in := range ac.SupportedInterfaces {
		in.URL = "https://other.example/agent"
	}
	ac.Skills[0].ID, ac.Skills[0].SecurityRequirements = "helper", nil
	card, err = ParseCard(mustJSON(t, ac), "https://other.example/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	if card.Brand != "helper" || card.PublicURL != "https://other.example" || card.Scope != "s:1" {
		t.Fatalf("fallbacks: brand %q public %q scope %q", card.Brand, card.PublicURL, card.Scope)
	}

	// A non-Aether endpoint with the brand in the card URL.
	ac = pactCard("https://other.example", "x", "s:1")
	for _, in := range ac.SupportedInterfaces {
		in.URL = "https://api.other.example/rpc"
	}
	card, err = ParseCard(mustJSON(t, ac), "https://other.example/a2a/review/.well-known/agent-card.json")
	if err != nil || card.Brand != "review" || card.PublicURL != "https://api.other.example" {
		t.Fatalf("brand from card URL: %+v, %v", card, err)
	}

	// A version that is not A2A 1.x is not chosen.
	ac = pactCard("https://n.example", "review", "r")
	for _, in := range ac.SupportedInterfaces {
		in.ProtocolVersion = "0.3"
	}
	card, _ = ParseCard(mustJSON(t, ac), "https://n.example/a2a/review/.well-known/agent-card.json")
	if _, err := card.Interface(a2a.TransportProtocolJSONRPC); err == nil {
		t.Fatal("an A2A 0.3 interface was chosen")
	}
}

func TestParseCardRefusesBadCards(t *testing.T) {
	for name, body := range map[string]string{
		"not json":      `<html>`,
		"no interfaces": `{"name":"x","supportedInterfaces":[]}`,
		"null iface":    `{"name":"x","supportedInterfaces":[null]}`,
		"bad scopes":    `{"name":"x","supportedInterfaces":[{"url":"https://n.example/a2a/x"}],"securityRequirements":[{"schemes":{"pactAgent":"all"}}]}`,
	} {
		if _, err := ParseCard([]byte(body), "https://n.example/.well-known/agent-card.json"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestFetchCard(t *testing.T) {
	var gotAuth []string
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("/a2a/review/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		w.Write(mustJSON(t, pactCard(srv.URL, "review", "review:read_only")))
	})
	mux.HandleFunc("/huge/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"name":"` + strings.Repeat("x", maxDocumentBytes) + `"}`))
	})
	c := &Client{Identity: StaticIdentity("secret")}
	card, err := c.FetchCard(context.Background(), srv.URL+"/a2a/review/.well-known/agent-card.json")
	if err != nil || card.PublicURL != srv.URL {
		t.Fatalf("FetchCard = %+v, %v", card, err)
	}
	if len(gotAuth) != 1 || gotAuth[0] != "" {
		t.Fatalf("the card fetch sent credentials: %q", gotAuth)
	}
	if _, err := c.FetchCard(context.Background(), srv.URL+"/huge/.well-known/agent-card.json"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("huge card: %v", err)
	}
	if _, err := c.FetchCard(context.Background(), srv.URL+"/nope/.well-known/agent-card.json"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("missing card: %v", err)
	}
}

func TestParseBinding(t *testing.T) {
	for in, want := range map[string]a2a.TransportProtocol{"": a2a.TransportProtocolJSONRPC, "JSONRPC": a2a.TransportProtocolJSONRPC, "rest": a2a.TransportProtocolHTTPJSON, "HTTP+JSON": a2a.TransportProtocolHTTPJSON} {
		if got, err := ParseBinding(in); err != nil || got != want {
			t.Errorf("ParseBinding(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseBinding("grpc"); err == nil {
		t.Error("grpc accepted")
	}
}
