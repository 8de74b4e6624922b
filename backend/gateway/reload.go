package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/aether/aether/backend/cardjson"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/policy"
)

// Reload serves s's policy from the next request on (policy.File's Serve). Brands whose
// configuration did not change keep their A2A handler, so their running turns and streams go on.
func (g *Gateway) Reload(s policy.Snapshot) error {
	p := s.Policy
	if p == nil || p.Pact == nil {
		return errors.New("gateway: the policy has no pact section")
	}
	if s.Hash == "" { // receipts record it (P11): a snapshot is taken with Policy.Snapshot
		return errors.New("gateway: the policy snapshot has no hash")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	u := newURLs(p.Pact.PublicURL)
	next := &routes{policy: p, hash: s.Hash, brands: map[domain.BrandID]*brandRoute{}, proxies: p.Pact.Proxies()}
	for _, b := range p.Pact.Brands {
		if old := g.brands[b.ID]; old != nil && reflect.DeepEqual(old.brand, b) && old.brandURL == u.brand(b.ID) {
			next.brands[b.ID] = old
			continue
		}
		br, err := g.newBrandRoute(u, b, g.cardTime())
		if err != nil {
			return err
		}
		next.brands[b.ID] = br
	}
	if len(p.Pact.Brands) == 1 {
		next.single = next.brands[p.Pact.Brands[0].ID]
	}
	jwks, err := newStaticJSON(g.cfg.Keys.JWKS(), "300", time.Time{})
	if err != nil {
		return fmt.Errorf("gateway: jwks: %w", err)
	}
	next.jwks = jwks
	meta, err := newStaticJSON(authorizationServerMetadata(u, p), "300", time.Time{})
	if err != nil {
		return fmt.Errorf("gateway: metadata: %w", err)
	}
	next.metadata = meta
	g.brands = next.brands
	g.routes.Store(next)
	g.cfg.CardsModified = time.Time{} // later reloads date their cards themselves
	return nil
}

// cardTime is the Last-Modified of a card built now.
func (g *Gateway) cardTime() time.Time {
	if !g.cfg.CardsModified.IsZero() {
		return g.cfg.CardsModified
	}
	return time.Now()
}

// signedCard is a brand's card, signed by the node key when there is one, and
// its handler.
func (g *Gateway) signedCard(u urls, b policy.Brand, modified time.Time) (*a2a.AgentCard, *staticJSON, error) {
	card := buildCard(u, b)
	if g.cfg.Signer != nil {
		body, err := cardjson.Marshal(card)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway: card for %s: %w", b.ID, err)
		}
		sig, err := g.cfg.Signer.SignCard(body)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway: card for %s: %w", b.ID, err)
		}
		card.Signatures = []a2a.AgentCardSignature{sig}
	}
	body, err := cardjson.Marshal(card)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: card for %s: %w", b.ID, err)
	}
	h, err := newStaticJSON(json.RawMessage(body), "300", modified)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: card for %s: %w", b.ID, err)
	}
	return card, h, nil
}

func (g *Gateway) newBrandRoute(u urls, b policy.Brand, modified time.Time) (*brandRoute, error) {
	card, cardHandler, err := g.signedCard(u, b, modified)
	if err != nil {
		return nil, err
	}
	// One task store per route: the SDK, the gate and the executor share it.
	tasks := g.cfg.Tasks.TaskStore(string(b.ID), ownerFromContext)
	exec := &executor{g: g, brand: b.ID, tasks: tasks}
	gate := &gate{g: g, brand: b.ID, urls: u, tasks: tasks, exec: exec}
	h := a2asrv.NewHandler(exec,
		a2asrv.WithTaskStore(tasks),
		a2asrv.WithCallInterceptors(gate),
		a2asrv.WithCapabilityChecks(&card.Capabilities),
		a2asrv.WithLogger(g.cfg.Logger),
	)
	keepAlive := a2asrv.WithTransportKeepAlive(15 * time.Second)
	return &brandRoute{
		brand:    b,
		brandURL: u.brand(b.ID),
		card:     cardHandler,
		jsonrpc:  a2asrv.NewJSONRPCHandler(h, keepAlive),
		rest:     a2asrv.NewRESTHandler(h, keepAlive),
	}, nil
}

// authorizationServerMetadata is the RFC 8414 document of the node's device flow.
func authorizationServerMetadata(u urls, p *policy.Policy) map[string]any {
	scopes := []string{}
	for _, b := range p.Pact.Brands {
		scopes = append(scopes, b.Scope.ID)
	}
	return map[string]any{
		"issuer":                                u.base,
		"device_authorization_endpoint":         u.deviceAuthorization(),
		"token_endpoint":                        u.token(),
		"jwks_uri":                              u.jwks(),
		"grant_types_supported":                 []string{deviceCodeGrant, grantRefreshGrant},
		"scopes_supported":                      scopes,
		"response_types_supported":              []string{},
		"token_endpoint_auth_methods_supported": []string{"none"},
		"pact_identity":                         "Authorization: Bearer <identity JWT> on every request",
		"pact_delegation_header":                DelegationHeader,
	}
}
