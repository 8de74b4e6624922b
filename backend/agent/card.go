package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/cardjson"
	"github.com/aether/aether/backend/keys"
)

// Names a PACT node uses on the wire (docs/wire.md).
const (
	DelegationHeader = "PACT-Delegation"
	SchemeDelegation = "pactDelegation"
	// ExtensionURI is the PACT extension the agent activates in A2A-Extensions
	// when the card declares it (docs/pact-extension.md).
	ExtensionURI     = "urn:pact:extension:delegation:v1"
	cardWellKnown    = "/.well-known/agent-card.json"
	maxDocumentBytes = 1 << 20
)

// Card is an agent card with what a PACT agent needs from it.
type Card struct {
	*a2a.AgentCard
	// URL is where the card was read.
	URL string
	// Brand is the brand id: the path segment after /a2a/ of the card's
	// interfaces, else of the card URL, else its only skill's id.
	Brand string
	// PublicURL is the node's publicUrl: an interface URL without
	// /a2a/<brand> (else the first interface's origin).
	PublicURL string
	// Scope, DeviceAuthorizationURL and TokenURL come from the card's OAuth2
	// device-code security scheme (pactDelegation).
	Scope                  string
	DeviceAuthorizationURL string
	TokenURL               string
	// raw is the card's JSON as served: its signature covers that.
	raw []byte
}

// VerifySignature checks the card's A2A 1.0 §8.4 signature against the node
// JWKS: a card that is unsigned or whose signature fails is refused.
func (c *Card) VerifySignature(set keys.Set) error {
	if err := set.VerifyCard(c.raw); err != nil {
		return fmt.Errorf("agent card %s refused: %w", c.URL, err)
	}
	return nil
}

// KeysURL is the node JWKS that must verify the card: <publicUrl>/.well-known/jwks.json
// where publicUrl is read off the card URL the user gave (its origin, and the
// path before /a2a/<brand>/.well-known/agent-card.json or
// /.well-known/agent-card.json; the origin alone for any other path), never
// off the card's own interfaces: a card pointing at another server would
// otherwise name the keys that verify it (docs/threats.md R17).
func (c *Card) KeysURL() (string, error) {
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("card URL %q is not absolute", c.URL)
	}
	prefix, ok := strings.CutSuffix(u.Path, cardWellKnown)
	if !ok {
		prefix = ""
	} else if i := strings.LastIndex(prefix, "/a2a/"); i >= 0 && !strings.Contains(prefix[i+len("/a2a/"):], "/") {
		prefix = prefix[:i]
	}
	base := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: strings.TrimRight(prefix, "/")}
	return base.String() + jwksPath, nil
}

// CardURL turns what a user gives into a card URL: a URL ending in
// agent-card.json is used as it is; anything else is taken as the node's
// publicUrl, with the brand's card below it (or the node's single-brand card
// at the root when brand is empty).
func CardURL(target, brand string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(target))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("card %q: want an http(s) URL (the card's URL or the node's publicUrl)", target)
	}
	if strings.HasSuffix(u.Path, "/agent-card.json") {
		return u.String(), nil
	}
	u.RawQuery, u.Fragment = "", ""
	base := strings.TrimRight(u.String(), "/")
	if brand == "" {
		return base + cardWellKnown, nil
	}
	if strings.ContainsAny(brand, "/?#") {
		return "", fmt.Errorf("brand %q: a brand id has no /, ? or #", brand)
	}
	return base + "/a2a/" + url.PathEscape(brand) + cardWellKnown, nil
}

// FetchCard reads and parses the agent card at cardURL. No credentials are sent.
func (c *Client) FetchCard(ctx context.Context, cardURL string) (*Card, error) {
	body, err := c.get(ctx, cardURL, "the agent card")
	if err != nil {
		return nil, err
	}
	return ParseCard(body, cardURL)
}

// get reads a public JSON document (card, JWKS) of at most maxDocumentBytes.
func (c *Client) get(ctx context.Context, u, what string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.fetchClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("fetch %s at %s: HTTP %d %s", what, u, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if len(body) > maxDocumentBytes {
		return nil, fmt.Errorf("%s at %s is larger than %d bytes", what, u, maxDocumentBytes)
	}
	return body, nil
}

// ParseCard parses an agent card read from cardURL (A2A 1.0 JSON, or the
// bare scope arrays a2a-go servers write) and works out the brand, the node's
// publicUrl and the delegation endpoints.
func ParseCard(data []byte, cardURL string) (*Card, error) {
	var ac a2a.AgentCard
	if err := cardjson.Unmarshal(data, &ac); err != nil {
		return nil, fmt.Errorf("agent card %s: %w", cardURL, err)
	}
	var ifaces []*a2a.AgentInterface
	for _, in := range ac.SupportedInterfaces {
		if in != nil && in.URL != "" {
			ifaces = append(ifaces, in)
		}
	}
	if len(ifaces) == 0 {
		return nil, fmt.Errorf("agent card %s lists no supportedInterfaces", cardURL)
	}
	ac.SupportedInterfaces = ifaces
	card := &Card{AgentCard: &ac, URL: cardURL, raw: append([]byte(nil), data...)}

	for _, in := range ifaces {
		if pub, brand, ok := splitBrandURL(in.URL); ok {
			card.PublicURL, card.Brand = pub, brand
			break
		}
	}
	if card.PublicURL == "" {
		// Not an Aether-shaped endpoint: credentials go to the first
		// interface, so its origin is the node's; the brand may still be in
		// the card URL.
		u, err := url.Parse(ifaces[0].URL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("agent card %s: interface URL %q is not absolute", cardURL, ifaces[0].URL)
		}
		card.PublicURL = u.Scheme + "://" + u.Host
		if cu, err := url.Parse(cardURL); err == nil {
			cu.Path, cu.RawPath = strings.TrimSuffix(cu.Path, cardWellKnown), ""
			if _, brand, ok := splitBrandURL(cu.String()); ok {
				card.Brand = brand
			}
		}
	}
	if card.Brand == "" && len(ac.Skills) == 1 {
		card.Brand = ac.Skills[0].ID
	}

	name, flow := deviceScheme(ac.SecuritySchemes)
	if flow != nil {
		card.DeviceAuthorizationURL, card.TokenURL = flow.DeviceAuthorizationURL, flow.TokenURL
		card.Scope = skillScope(ac.Skills, card.Brand, name)
		if card.Scope == "" && len(flow.Scopes) == 1 {
			for s := range flow.Scopes {
				card.Scope = s
			}
		}
	}
	if card.Scope == "" {
		for _, ext := range ac.Capabilities.Extensions {
			if s, ok := ext.Params["scope"].(string); ok && s != "" {
				card.Scope = s
				break
			}
		}
	}
	return card, nil
}

// splitBrandURL splits <publicUrl>/a2a/<brand>[/] into its parts.
func splitBrandURL(raw string) (publicURL, brand string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" { // "//host/a2a/x" has no origin to trust
		return "", "", false
	}
	p := strings.TrimSuffix(u.Path, "/")
	i := strings.LastIndex(p, "/a2a/")
	if i < 0 {
		return "", "", false
	}
	brand = p[i+len("/a2a/"):]
	if brand == "" || strings.Contains(brand, "/") {
		return "", "", false
	}
	if b, err := url.PathUnescape(brand); err == nil {
		brand = b
	}
	u.Path, u.RawPath, u.RawQuery, u.Fragment = p[:i], "", "", ""
	return strings.TrimRight(u.String(), "/"), brand, true
}

// deviceScheme finds the OAuth2 device-code scheme: pactDelegation if it is
// one, else the first such scheme by name.
func deviceScheme(schemes a2a.NamedSecuritySchemes) (a2a.SecuritySchemeName, *a2a.DeviceCodeOAuthFlow) {
	names := make([]string, 0, len(schemes))
	for n := range schemes {
		names = append(names, string(n))
	}
	sort.Slice(names, func(i, j int) bool {
		return names[i] == SchemeDelegation || (names[j] != SchemeDelegation && names[i] < names[j])
	})
	for _, n := range names {
		if o, ok := schemes[a2a.SecuritySchemeName(n)].(a2a.OAuth2SecurityScheme); ok {
			if f, ok := o.Flows.(a2a.DeviceCodeOAuthFlow); ok {
				return a2a.SecuritySchemeName(n), &f
			}
		}
	}
	return "", nil
}

// skillScope is the scope the brand's skill requires of the device scheme.
func skillScope(skills []a2a.AgentSkill, brand string, scheme a2a.SecuritySchemeName) string {
	for _, sk := range skills {
		if brand != "" && sk.ID != brand && len(skills) > 1 {
			continue
		}
		for _, req := range sk.SecurityRequirements {
			if scopes := req[scheme]; len(scopes) > 0 {
				return scopes[0]
			}
		}
	}
	return ""
}

// declares reports whether the card's capabilities list the extension uri.
func (c *Card) declares(uri string) bool {
	for _, ext := range c.Capabilities.Extensions {
		if ext.URI == uri {
			return true
		}
	}
	return false
}

// Interface picks the card's interface for binding (a2a.TransportProtocolJSONRPC
// or a2a.TransportProtocolHTTPJSON) that speaks A2A 1.x.
func (c *Card) Interface(binding a2a.TransportProtocol) (*a2a.AgentInterface, error) {
	var seen []string
	for _, in := range c.SupportedInterfaces {
		v := strings.TrimPrefix(string(in.ProtocolVersion), "v")
		if strings.EqualFold(string(in.ProtocolBinding), string(binding)) && (v == "1" || strings.HasPrefix(v, "1.")) {
			return in, nil
		}
		seen = append(seen, fmt.Sprintf("%s %s", in.ProtocolBinding, in.ProtocolVersion))
	}
	return nil, fmt.Errorf("the card offers no %s interface for A2A 1.x (it offers: %s)", binding, strings.Join(seen, ", "))
}

// ParseBinding reads a binding name as users type it: jsonrpc, rest,
// http+json (any case). Empty is JSON-RPC.
func ParseBinding(s string) (a2a.TransportProtocol, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "jsonrpc", "json-rpc":
		return a2a.TransportProtocolJSONRPC, nil
	case "rest", "http+json", "http-json", "httpjson":
		return a2a.TransportProtocolHTTPJSON, nil
	}
	return "", errors.New("binding " + s + ": use jsonrpc or rest (HTTP+JSON)")
}
