package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/idna"

	"github.com/aether/aether/backend/admin"
	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
)

// backend adapts the node's services to the admin UI's API (admin-api.md).
type backend struct {
	n    *Node
	save sync.Mutex // one Brands-page write at a time
}

func agentDTO(iss, sub string) admin.Agent {
	return admin.Agent{Issuer: iss, Subject: sub, IssuerOrigin: issuerOrigin(iss)}
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

func (b *backend) brandName(id string) string {
	b.n.mu.Lock()
	p := b.n.pol
	b.n.mu.Unlock()
	if br, ok := p.Brand(id); ok {
		return br.Name
	}
	return id
}

func (b *backend) scopeDesc(brand, scope string) string {
	b.n.mu.Lock()
	p := b.n.pol
	b.n.mu.Unlock()
	if br, ok := p.Brand(brand); ok && br.Scope.ID == scope {
		return br.Scope.Description
	}
	return ""
}

func requestDTO(r consent.Request) admin.ConsentRequest {
	name := r.BrandName
	if name == "" {
		name = r.Brand
	}
	return admin.ConsentRequest{
		ID: r.ID, UserCode: r.UserCode, Agent: agentDTO(r.Agent.Issuer, r.Agent.Subject),
		Brand: admin.BrandRef{ID: r.Brand, Name: name}, Scope: admin.Scope{ID: r.Scope, Description: r.ScopeDescription},
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
	}
}

func (b *backend) grantDTO(g consent.GrantView) admin.Grant {
	return admin.Grant{
		ID: g.ID, Agent: agentDTO(g.Agent.Issuer, g.Agent.Subject), Brand: admin.BrandRef{ID: g.Brand, Name: b.brandName(g.Brand)},
		Scope: admin.Scope{ID: g.Scope, Description: b.scopeDesc(g.Brand, g.Scope)}, AccessMode: g.AccessMode,
		IssuedAt: g.IssuedAt, ExpiresAt: g.ExpiresAt, LastUsedAt: g.LastUsedAt, Uses: g.Uses, Status: g.Status, RevokedAt: g.RevokedAt,
	}
}

func receiptDTO(r *receipts.Receipt) admin.ReceiptSummary {
	c := r.Claims
	s := admin.ReceiptSummary{
		ID: r.ID, Seq: r.Seq, TaskID: c.Task, Brand: c.Brand, Scope: c.Scope, GrantID: c.Grant,
		Agent: agentDTO(c.Agent.Issuer, c.Agent.Subject), Status: c.Status, ExitCode: c.Exit, AnswerHash: c.Ans,
	}
	s.StartedAt, _ = time.Parse(time.RFC3339Nano, c.Started)
	s.EndedAt, _ = time.Parse(time.RFC3339Nano, c.Ended)
	return s
}

func brandDTO(br policy.Brand, publicURL string) admin.Brand {
	return admin.Brand{
		ID: br.ID, Name: br.Name, Description: br.Description, Capability: br.Capability, Workspace: br.Workspace,
		AccessMode: string(br.AccessMode), Scope: admin.Scope{ID: br.Scope.ID, Description: br.Scope.Description},
		CardURL: strings.TrimRight(publicURL, "/") + "/a2a/" + br.ID + "/.well-known/agent-card.json",
	}
}

func policyErrorDTO(err error) *admin.PolicyError {
	if err == nil {
		return nil
	}
	pe := &admin.PolicyError{Message: err.Error(), Problems: []admin.Problem{}}
	var perr *policy.Error
	if errors.As(err, &perr) {
		pe.Message = fmt.Sprintf("%s has %d problem(s); the gateway is stopped until they are fixed", perr.File, len(perr.Problems))
		for _, p := range perr.Problems {
			pe.Problems = append(pe.Problems, admin.Problem{Path: p.Path, Message: p.Message})
		}
	}
	return pe
}

func (b *backend) Status(ctx context.Context) (admin.Status, error) {
	n := b.n
	n.mu.Lock()
	p, perr, gw := n.pol, n.polErr, n.gw
	n.mu.Unlock()
	st := admin.Status{
		Gateway: admin.GatewayStatus{Listen: n.addrs.Gateway, PublicURL: n.addrs.PublicURL, Running: gw != nil && perr == nil},
		Admin:   admin.AdminStatus{URL: "https://" + n.addrs.Admin},
		Policy:  admin.PolicyStatus{Path: n.polPath, Error: policyErrorDTO(perr)},
		Brands:  []admin.Brand{},
	}
	if gw != nil {
		st.Gateway.Paused = gw.Paused()
	}
	if p != nil {
		for _, br := range p.Pact.Brands {
			st.Brands = append(st.Brands, brandDTO(br, n.addrs.PublicURL))
		}
	}
	h := n.Codex()
	st.Codex = admin.CodexStatus{Found: h.Found, Path: h.Path, Version: h.Version, VersionOK: h.VersionOK, LoggedIn: h.LoggedIn || h.APIKey, Error: h.Error}
	st.Codex.Credential.Kind, st.Codex.Credential.Summary, st.Codex.Credential.Problem = h.Credential.Kind, h.Credential.Summary, h.Credential.Problem
	st.Confinement = admin.Confinement{Available: h.Confinement.Available, Mechanism: h.Confinement.Mechanism, Text: h.Confinement.Text()}
	pending, err := n.consent.Pending(ctx)
	if err != nil {
		return st, err
	}
	st.Pending = len(pending)
	recs, _, err := n.ledger.List(ctx, store.ReceiptFilter{Limit: 5})
	if err != nil {
		return st, err
	}
	for i := range recs {
		st.LastReceipts = append(st.LastReceipts, receiptDTO(&recs[i]))
	}
	return st, nil
}

func (b *backend) Pending(ctx context.Context) ([]admin.ConsentRequest, error) {
	reqs, err := b.n.consent.Pending(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.ConsentRequest, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, requestDTO(r))
	}
	return out, nil
}

func (b *backend) LookupCode(ctx context.Context, code string) (admin.CodeLookup, error) {
	r, status, err := b.n.consent.Lookup(ctx, code)
	switch {
	case errors.Is(err, consent.ErrNotFound), errors.Is(err, consent.ErrBadUserCode):
		return admin.CodeLookup{UserCode: code, Status: "unknown"}, nil
	case err != nil:
		return admin.CodeLookup{}, err
	}
	out := admin.CodeLookup{UserCode: r.UserCode, Status: string(status)}
	switch status {
	case domain.FlowApproved, domain.FlowRedeemed:
		out.Status = "allowed"
	case domain.FlowLocked:
		out.Status = "expired"
	}
	return out, nil
}

func (b *backend) Decide(ctx context.Context, id string, req admin.DecisionRequest) (admin.DecisionResult, error) {
	var allow bool
	switch req.Decision {
	case admin.DecisionAllow:
		allow = true
	case admin.DecisionDeny:
	default:
		return admin.DecisionResult{}, fmt.Errorf("%w: decision must be allow or deny", admin.ErrInvalid)
	}
	dur, err := durationOf(req.Duration)
	if err != nil {
		return admin.DecisionResult{}, err
	}
	d, err := b.n.consent.Decide(ctx, id, req.UserCode, allow, dur)
	if err != nil {
		return admin.DecisionResult{}, consentErr(err)
	}
	res := admin.DecisionResult{Status: d.Outcome}
	if d.Grant != nil {
		g := b.grantDTO(*d.Grant)
		res.Grant = &g
	}
	return res, nil
}

// durationOf maps the UI's choices onto grant lifetimes.
func durationOf(s string) (consent.Duration, error) {
	switch s {
	case "":
		return consent.DefaultDuration, nil
	case admin.Duration1Day:
		return consent.Day, nil
	case admin.Duration30Days:
		return consent.Month, nil
	case admin.DurationForever:
		return consent.Forever, nil
	}
	return "", fmt.Errorf("%w: duration must be 1d, 30d or forever", admin.ErrInvalid)
}

// consentErr maps consent's errors onto the admin API's statuses, keeping
// consent's own words for the owner.
func consentErr(err error) error {
	for _, m := range []struct{ from, to error }{
		{consent.ErrNotFound, admin.ErrNotFound},
		{consent.ErrAlreadyDecided, admin.ErrAlreadyDecided},
		{consent.ErrExpired, admin.ErrExpired},
		{consent.ErrLocked, admin.ErrExpired},
		{consent.ErrBrandChanged, admin.ErrExpired},
		{consent.ErrWrongCode, admin.ErrCodeMismatch},
		{consent.ErrBadUserCode, admin.ErrCodeMismatch},
		{consent.ErrBadDuration, admin.ErrInvalid},
	} {
		if errors.Is(err, m.from) {
			return kindError{err, m.to}
		}
	}
	return err
}

// kindError is err, classified as kind for the API's status.
type kindError struct{ err, kind error }

func (e kindError) Error() string        { return e.err.Error() }
func (e kindError) Is(target error) bool { return target == e.kind }
func (e kindError) Unwrap() error        { return e.err }

func (b *backend) Grants(ctx context.Context) ([]admin.Grant, error) {
	gs, err := b.n.consent.Grants(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Grant, 0, len(gs))
	for _, g := range gs {
		out = append(out, b.grantDTO(g))
	}
	return out, nil
}

func (b *backend) Revoke(ctx context.Context, id string) (admin.Grant, error) {
	g, err := b.n.consent.Revoke(ctx, id)
	if err != nil {
		return admin.Grant{}, consentErr(err)
	}
	return b.grantDTO(*g), nil
}

func storeFilter(f admin.ReceiptFilter) (store.ReceiptFilter, error) {
	sf := store.ReceiptFilter{Agent: f.Agent, Brand: f.Brand, Status: f.Status, From: f.From, To: f.To, Limit: f.Limit}
	if f.Cursor != "" {
		c, err := strconv.ParseInt(f.Cursor, 10, 64)
		if err != nil || c < 0 {
			return sf, fmt.Errorf("%w: bad cursor", admin.ErrInvalid)
		}
		sf.Cursor = c
	}
	return sf, nil
}

func (b *backend) Receipts(ctx context.Context, f admin.ReceiptFilter) (admin.ReceiptPage, error) {
	sf, err := storeFilter(f)
	if err != nil {
		return admin.ReceiptPage{}, err
	}
	recs, next, err := b.n.ledger.List(ctx, sf)
	if err != nil {
		return admin.ReceiptPage{}, err
	}
	page := admin.ReceiptPage{Receipts: make([]admin.ReceiptSummary, 0, len(recs))}
	for i := range recs {
		page.Receipts = append(page.Receipts, receiptDTO(&recs[i]))
	}
	if next > 0 {
		page.NextCursor = strconv.FormatInt(next, 10)
	}
	return page, nil
}

func (b *backend) Receipt(ctx context.Context, id string) (admin.ReceiptDetail, error) {
	r, err := b.n.ledger.Get(ctx, id)
	if errors.Is(err, store.ErrReceiptNotFound) {
		return admin.ReceiptDetail{}, fmt.Errorf("%w: no receipt %s", admin.ErrNotFound, id)
	}
	if err != nil {
		return admin.ReceiptDetail{}, err
	}
	claims, err := json.Marshal(r.Claims)
	if err != nil {
		return admin.ReceiptDetail{}, err
	}
	d := admin.ReceiptDetail{Receipt: receiptDTO(r), Claims: claims, JWS: r.JWS, Verify: admin.VerifyResult{OK: true}}
	if _, err := receipts.VerifyOne(r.JWS, b.n.ring.Set()); err != nil {
		d.Verify = admin.VerifyResult{OK: false, Error: err.Error()}
	}
	return d, nil
}

func (b *backend) ExportReceipts(ctx context.Context, f admin.ReceiptFilter, w io.Writer) error {
	sf, err := storeFilter(f)
	if err != nil {
		return err
	}
	sf.Oldest = true
	return receipts.Export(ctx, b.n.ledger.Source(ctx, sf), w)
}

func (b *backend) Brands(ctx context.Context) (admin.BrandsView, error) {
	n := b.n
	n.mu.Lock()
	p, perr := n.pol, n.polErr
	n.mu.Unlock()
	v := admin.BrandsView{PolicyPath: n.polPath, Brands: []admin.Brand{}, Error: policyErrorDTO(perr)}
	if p != nil && perr == nil {
		for _, br := range p.Pact.Brands {
			v.Brands = append(v.Brands, brandDTO(br, n.addrs.PublicURL))
		}
	}
	return v, nil
}

// editable is the policy the Brands page may edit: never a guessed one.
func (b *backend) editable() (*policy.Policy, error) {
	b.n.mu.Lock()
	defer b.n.mu.Unlock()
	if b.n.polErr != nil || b.n.pol == nil {
		return nil, fmt.Errorf("%w: policy.json has errors; fix the file first (the problems are listed above)", admin.ErrInvalid)
	}
	return b.n.pol.Clone(), nil
}

func (b *backend) PutBrand(ctx context.Context, id string, in admin.Brand) ([]admin.Brand, error) {
	b.save.Lock()
	defer b.save.Unlock()
	p, err := b.editable()
	if err != nil {
		return nil, err
	}
	nb := policy.Brand{
		ID: in.ID, Name: in.Name, Description: in.Description, Capability: in.Capability, Workspace: in.Workspace,
		AccessMode: policy.AccessMode(in.AccessMode), Scope: policy.Scope{ID: in.Scope.ID, Description: in.Scope.Description},
	}
	idx := -1
	for i, br := range p.Pact.Brands {
		if br.ID == id {
			idx = i
			nb.Instructions = br.Instructions
		}
	}
	if idx >= 0 {
		p.Pact.Brands[idx] = nb
	} else {
		p.Pact.Brands = append(p.Pact.Brands, nb)
		idx = len(p.Pact.Brands) - 1
	}
	return b.write(p, idx)
}

func (b *backend) DeleteBrand(ctx context.Context, id string) ([]admin.Brand, error) {
	b.save.Lock()
	defer b.save.Unlock()
	p, err := b.editable()
	if err != nil {
		return nil, err
	}
	kept := p.Pact.Brands[:0]
	found := false
	for _, br := range p.Pact.Brands {
		if br.ID == id {
			found = true
			continue
		}
		kept = append(kept, br)
	}
	if !found {
		return nil, fmt.Errorf("%w: no brand %q", admin.ErrNotFound, id)
	}
	p.Pact.Brands = kept
	return b.write(p, -1)
}

// write validates, saves policy.json atomically (keeping the sections it does
// not manage) and serves the result at once.
func (b *backend) write(p *policy.Policy, idx int) ([]admin.Brand, error) {
	n := b.n
	if err := policy.Save(n.polPath, p); err != nil {
		return nil, fieldErrors(err, idx)
	}
	saved, err := n.policyLimits().Load(n.polPath)
	if err != nil {
		return nil, fmt.Errorf("re-read %s after saving: %w", n.polPath, err)
	}
	if fi, err := os.Stat(n.polPath); err == nil {
		n.mu.Lock()
		n.polModTime = fi.ModTime()
		n.mu.Unlock()
	}
	if err := n.applyPolicy(saved); err != nil {
		return nil, err
	}
	n.notifyPolicy()
	out := []admin.Brand{}
	for _, br := range saved.Pact.Brands {
		out = append(out, brandDTO(br, n.addrs.PublicURL))
	}
	return out, nil
}

// fieldErrors turns policy problems about the edited brand into per-field
// messages (the Brand JSON keys); other problems go into the message.
func fieldErrors(err error, idx int) error {
	var perr *policy.Error
	if !errors.As(err, &perr) {
		return err
	}
	fe := &admin.FieldErrors{Message: "The brand was not saved: fix the fields marked below."}
	prefix := fmt.Sprintf("pact.brands[%d].", idx)
	var other []string
	for _, pr := range perr.Problems {
		if idx >= 0 && strings.HasPrefix(pr.Path, prefix) {
			field := strings.TrimPrefix(pr.Path, prefix)
			fe.Fields = append(fe.Fields, admin.FieldError{Field: field, Message: pr.Message})
			continue
		}
		other = append(other, pr.Path+": "+pr.Message)
	}
	if len(other) > 0 {
		fe.Message = "The policy was not saved: " + strings.Join(other, "; ")
	}
	return fe
}

func (b *backend) Events(ctx context.Context) (<-chan admin.Event, error) {
	return b.n.hub.subscribe(ctx), nil
}
