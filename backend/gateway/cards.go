package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/cardjson"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/policy"
)

// Names on the wire (docs/wire.md).
const (
	DelegationHeader = "PACT-Delegation"
	SchemeAgent      = "pactAgent"
	SchemeDelegation = "pactDelegation"
	// ExtensionURI names the PACT extension (docs/pact-extension.md). It is not
	// marked required: a client that does not know it still gets a plain A2A
	// AUTH_REQUIRED, and a2a-go's own required check does not split
	// A2A-Extensions on commas.
	ExtensionURI = "urn:pact:extension:delegation:v1"
)

// urls are every address the gateway publishes, all built from publicUrl and
// never from a request's Host header.
type urls struct{ base string }

func newURLs(publicURL string) urls { return urls{base: strings.TrimRight(publicURL, "/")} }

func (u urls) brand(id domain.BrandID) string { return u.base + "/a2a/" + string(id) }
func (u urls) card(id domain.BrandID) string  { return u.brand(id) + "/.well-known/agent-card.json" }
func (u urls) deviceAuthorization() string    { return u.base + "/pact/device_authorization" }
func (u urls) token() string                  { return u.base + "/pact/token" }
func (u urls) metadata() string               { return u.base + "/.well-known/oauth-authorization-server" }
func (u urls) jwks() string                   { return u.base + "/.well-known/jwks.json" }

// buildCard makes a brand's agent card: no provider, JSON-RPC first then
// HTTP+JSON, the two PACT security schemes, one skill, and a version that is a
// hash of the card's own content (it changes only when the content does).
func buildCard(u urls, b policy.Brand) *a2a.AgentCard {
	endpoint := u.brand(b.ID)
	card := &a2a.AgentCard{
		Name:        b.Name,
		Description: b.Description,
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: endpoint, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
			{URL: endpoint, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2a.Version},
		},
		Capabilities: a2a.AgentCapabilities{
			Streaming: true,
			Extensions: []a2a.AgentExtension{{
				URI:         ExtensionURI,
				Description: "PACT delegation: send the delegation token the owner's consent produced in the " + DelegationHeader + " header of every turn.",
				Required:    false,
				Params:      map[string]any{"header": DelegationHeader, "scope": b.Scope.ID},
			}},
		},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		SecuritySchemes: a2a.NamedSecuritySchemes{
			SchemeAgent: a2a.HTTPAuthSecurityScheme{
				Scheme:       "bearer",
				BearerFormat: "JWT",
				Description:  "The personal agent's identity JWT (issuer JWKS found through OpenID or RFC 8414 discovery).",
			},
			SchemeDelegation: a2a.OAuth2SecurityScheme{
				Description: "The owner's consent, obtained with the OAuth 2.0 device authorization grant and sent in the " + DelegationHeader + " header.",
				Flows: a2a.DeviceCodeOAuthFlow{
					DeviceAuthorizationURL: u.deviceAuthorization(),
					TokenURL:               u.token(),
					Scopes:                 map[string]string{b.Scope.ID: b.Scope.Description},
				},
				Oauth2MetadataURL: u.metadata(),
			},
		},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{SchemeAgent: a2a.SecuritySchemeScopes{}}},
		Skills: []a2a.AgentSkill{{
			ID:          string(b.ID),
			Name:        b.Name,
			Description: b.Description,
			Tags:        []string{b.Capability, string(b.AccessMode)},
			SecurityRequirements: a2a.SecurityRequirementsOptions{{
				SchemeAgent:      a2a.SecuritySchemeScopes{},
				SchemeDelegation: a2a.SecuritySchemeScopes{b.Scope.ID},
			}},
		}},
	}
	content, err := cardjson.Marshal(card)
	if err != nil {
		// Cards are built from values only; failing here is a programming error.
		panic(fmt.Sprintf("agent card for %s does not marshal: %v", b.ID, err))
	}
	sum := sha256.Sum256(content)
	card.Version = "1.0.0+" + hex.EncodeToString(sum[:6])
	return card
}

// staticJSON serves a document with an ETag, Cache-Control and (when
// modified is set) Last-Modified, answering If-None-Match and
// If-Modified-Since with 304 (RFC 9110 §13.2.2: If-None-Match wins).
type staticJSON struct {
	body     []byte
	etag     string
	maxAge   string
	modified time.Time // zero: no Last-Modified
}

func newStaticJSON(v any, maxAge string, modified time.Time) (*staticJSON, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	return &staticJSON{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, maxAge: maxAge,
		modified: modified.UTC().Truncate(time.Second)}, nil
}

// notModified is the RFC 9110 §13.2.2 evaluation for GET and HEAD.
func (s *staticJSON) notModified(r *http.Request) bool {
	if match := r.Header.Get("If-None-Match"); match != "" {
		return etagMatches(match, s.etag)
	}
	if since := r.Header.Get("If-Modified-Since"); since != "" && !s.modified.IsZero() {
		t, err := http.ParseTime(since)
		return err == nil && !s.modified.After(t)
	}
	return false
}

func (s *staticJSON) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "public, max-age="+s.maxAge)
	h.Set("ETag", s.etag)
	h.Set("Access-Control-Allow-Origin", "*")
	if !s.modified.IsZero() {
		h.Set("Last-Modified", s.modified.Format(http.TimeFormat))
	}
	if s.notModified(r) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(s.body)
}

func etagMatches(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(part), "W/"))
		if part == etag || part == "*" {
			return true
		}
	}
	return false
}
