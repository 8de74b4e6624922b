package owner

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/idna"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/site"
)

// AgentOf is the agent (issuer, subject) as every front door shows it.
func AgentOf(iss, sub string) Agent { return agentDTO(iss, sub) }

func agentDTO(iss, sub string) Agent {
	n := site.Describe(iss, sub)
	return Agent{Issuer: iss, Subject: sub, IssuerOrigin: issuerOrigin(iss), Site: n.Site, SiteName: n.SiteName, Host: n.Host, Claim: n.Claim}
}

// issuerOrigin shows the issuer's scheme and host with the host in punycode, so
// a look-alike (Cyrillic "а" for "a") is visible next to the real one (C9).
func issuerOrigin(iss string) string {
	u, err := url.Parse(iss)
	if err != nil || u.Host == "" {
		return iss
	}
	host := u.Hostname()
	if a, err := idna.ToASCII(host); err == nil {
		host = a
	}
	if p := u.Port(); p != "" {
		host += ":" + p
	}
	return u.Scheme + "://" + host
}

func (s *Service) brandName(id domain.BrandID) string {
	if br, ok := s.served().Brand(id); ok {
		return br.Name
	}
	return string(id)
}

func (s *Service) scopeDesc(brand domain.BrandID, scope string) string {
	if br, ok := s.served().Brand(brand); ok && br.Scope.ID == scope {
		return br.Scope.Description
	}
	return ""
}

// requestDTO names the request's brand and describes its scope as the served policy has the
// brand now (its id alone when the brand is gone).
func (s *Service) requestDTO(r consent.Request) ConsentRequest {
	name, desc, budget := string(r.Brand), "", int64(0)
	if br, ok := s.served().Brand(r.Brand); ok {
		desc, budget = br.Scope.Description, br.TokensPerDay
		if br.Name != "" {
			name = br.Name
		}
	}
	return ConsentRequest{
		ID: r.ID, UserCode: r.UserCode, Agent: agentDTO(r.Agent.Issuer, r.Agent.Subject),
		Brand: BrandRef{ID: r.Brand, Name: name}, Scope: Scope{ID: r.Scope, Description: desc},
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, TokensPerDay: budget,
	}
}

func (s *Service) grantDTO(g consent.GrantView) Grant {
	out := Grant{
		ID: g.ID, Agent: agentDTO(g.Agent.Issuer, g.Agent.Subject), Brand: BrandRef{ID: g.Brand, Name: s.brandName(g.Brand)},
		Scope: Scope{ID: g.Scope, Description: s.scopeDesc(g.Brand, g.Scope)}, AccessMode: g.AccessMode,
		IssuedAt: g.IssuedAt, ExpiresAt: g.ExpiresAt, LastUsedAt: g.LastUsedAt, Uses: g.Uses, Status: g.Status, RevokedAt: g.RevokedAt,
	}
	if br, ok := s.served().Brand(g.Brand); ok {
		out.TokensPerDay = br.TokensPerDay
	}
	if g.TokensPerDay != nil {
		out.TokensPerDay = *g.TokensPerDay
	}
	if s.cfg.TokensToday != nil {
		out.TokensToday = s.cfg.TokensToday(string(g.ID))
	}
	return out
}

func receiptDTO(r *receipts.Receipt) ReceiptSummary {
	c := r.Claims
	s := ReceiptSummary{
		ID: r.ID, Seq: r.Seq, TaskID: c.Task, Brand: c.Brand, Scope: c.Scope, GrantID: c.Grant,
		Agent: agentDTO(c.Agent.Issuer, c.Agent.Subject), Status: c.Status, ExitCode: c.Exit, AnswerHash: c.Ans,
	}
	s.StartedAt, _ = time.Parse(time.RFC3339Nano, c.Started)
	s.EndedAt, _ = time.Parse(time.RFC3339Nano, c.Ended)
	return s
}

func brandDTO(br policy.Brand, publicURL string) Brand {
	return Brand{
		ID: br.ID, Name: br.Name, Description: br.Description, Capability: br.Capability, Workspace: br.Workspace,
		AccessMode: br.AccessMode, Scope: Scope{ID: br.Scope.ID, Description: br.Scope.Description},
		CardURL: strings.TrimRight(publicURL, "/") + "/a2a/" + string(br.ID) + "/.well-known/agent-card.json",
	}
}

func (s *Service) brandDTOs(p *policy.Policy) []Brand {
	out := []Brand{}
	if p != nil && p.Pact != nil {
		for _, br := range p.Pact.Brands {
			out = append(out, brandDTO(br, s.PublicURL()))
		}
	}
	return out
}

func policyErrorDTO(err error) *PolicyError {
	if err == nil {
		return nil
	}
	pe := &PolicyError{Message: err.Error(), Problems: []Problem{}}
	var perr *policy.Error
	if errors.As(err, &perr) {
		pe.Message = fmt.Sprintf("%s has %d problem(s); the gateway is stopped until they are fixed", perr.File, len(perr.Problems))
		for _, p := range perr.Problems {
			pe.Problems = append(pe.Problems, Problem{Path: p.Path, Message: p.Message})
		}
	}
	return pe
}
