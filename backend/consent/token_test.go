package consent

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/golang-jwt/jwt/v5"
)

// claimsOf decodes a delegation token made by the fixture's key.
func (f *fixture) claimsOf(tok string) delegationClaims {
	f.t.Helper()
	var c delegationClaims
	if err := f.key.Set().Verify(tok, DelegationTokenType, &c, jwt.WithTimeFunc(f.clock.Now)); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// forge signs claims c with the node key, as only a bug or a key thief could.
func (f *fixture) forge(c delegationClaims) string {
	f.t.Helper()
	tok, err := f.key.Sign(DelegationTokenType, c)
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

func TestTokenClaims(t *testing.T) {
	f := newFixture(t)
	tok, gid := f.grant(alice, "review", Month)
	c := f.claimsOf(tok.AccessToken)
	now := f.clock.Now()
	if c.Issuer != publicURL || c.Subject != "alice" || c.AgentIss != alice.Issuer ||
		len(c.Audience) != 1 || c.Audience[0] != publicURL+"/a2a/review/.well-known/agent-card.json" || c.Scope != "review:read_only" ||
		c.Grant != string(gid) || c.ID == "" || !c.IssuedAt.Equal(now) || !c.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("claims = %+v", c)
	}
	if tok.TokenType != "Bearer" || tok.ExpiresIn != 3600 || tok.Scope != "review:read_only" {
		t.Errorf("token = %+v", tok)
	}
	d, err := f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol())
	if err != nil {
		t.Fatal(err)
	}
	if d.GrantID != gid || d.Scope != "review:read_only" || d.Brand != "review" || d.Agent != alice || !d.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("delegation = %+v", d)
	}
}

func TestDelegationToken(t *testing.T) {
	t.Run("missing token", func(t *testing.T) {
		f := newFixture(t)
		_, err := f.svc.CheckDelegation(ctx, "", alice, "review", f.pol())
		wantReason(t, err, ReasonMissing)
	})

	t.Run("G1 tampered or foreign signature", func(t *testing.T) {
		f := newFixture(t)
		tok, _ := f.grant(alice, "review", Month)
		parts := strings.Split(tok.AccessToken, ".")
		sig := []byte(parts[2])
		sig[3] ^= 1
		tampered := parts[0] + "." + parts[1] + "." + string(sig)
		// Payload swapped under the original signature.
		c := f.claimsOf(tok.AccessToken)
		c.Scope = "fix:read_write"
		swapped := strings.Split(f.forge(c), ".")[1]
		// Signed by another Ed25519 key, with that key's kid and with ours.
		_, other, _ := ed25519.GenerateKey(rand.Reader)
		otherKey := keys.FromPrivate(other)
		foreign, _ := otherKey.Sign(DelegationTokenType, f.claimsOf(tok.AccessToken))
		stolenKid := jwt.NewWithClaims(jwt.SigningMethodEdDSA, f.claimsOf(tok.AccessToken))
		stolenKid.Header["kid"], stolenKid.Header["typ"] = f.key.ID(), DelegationTokenType
		stolen, _ := stolenKid.SignedString(other)
		// A signed grant is not a delegation token.
		gs, _ := f.svc.Grants(ctx)
		for name, bad := range map[string]string{
			"tampered": tampered, "swapped payload": parts[0] + "." + swapped + "." + parts[2],
			"other key": foreign, "other key, our kid": stolen, "grant JWS": gs[0].JWS, "garbage": "a.b.c",
			"huge": strings.Repeat("A", 9000),
		} {
			_, err := f.svc.CheckDelegation(ctx, bad, alice, "review", f.pol())
			if de, ok := err.(*DelegationError); !ok || de.Reason != ReasonInvalid {
				t.Errorf("%s: %v", name, err)
			}
		}
	})

	t.Run("G2 other algorithms", func(t *testing.T) {
		f := newFixture(t)
		tok, _ := f.grant(alice, "review", Month)
		c := f.claimsOf(tok.AccessToken)
		sign := func(m jwt.SigningMethod, key any) string {
			tk := jwt.NewWithClaims(m, c)
			tk.Header["kid"], tk.Header["typ"] = f.key.ID(), DelegationTokenType
			s, err := tk.SignedString(key)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		for name, bad := range map[string]string{
			"none":                  sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType),
			"HS256 with public key": sign(jwt.SigningMethodHS256, []byte(f.key.Public())),
			"ES256":                 sign(jwt.SigningMethodES256, ec),
		} {
			_, err := f.svc.CheckDelegation(ctx, bad, alice, "review", f.pol())
			if de, ok := err.(*DelegationError); !ok || de.Reason != ReasonInvalid {
				t.Errorf("%s: %v", name, err)
			}
		}
	})

	t.Run("G3 expired or not yet valid", func(t *testing.T) {
		f := newFixture(t)
		tok, _ := f.grant(alice, "review", Month)
		f.clock.Advance(time.Hour + leeway - time.Second) // within the leeway
		if _, err := f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol()); err != nil {
			t.Fatalf("within leeway: %v", err)
		}
		f.clock.Advance(2 * time.Second)
		_, err := f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol())
		wantReason(t, err, ReasonExpired)

		fresh, _ := f.svc.Refresh(ctx, alice, "review", f.pol())
		c := f.claimsOf(fresh.AccessToken)
		future := c
		future.IssuedAt = jwt.NewNumericDate(f.clock.Now().Add(5 * time.Minute))
		_, err = f.svc.CheckDelegation(ctx, f.forge(future), alice, "review", f.pol())
		wantReason(t, err, ReasonInvalid)
		nbf := c
		nbf.NotBefore = jwt.NewNumericDate(f.clock.Now().Add(5 * time.Minute))
		_, err = f.svc.CheckDelegation(ctx, f.forge(nbf), alice, "review", f.pol())
		wantReason(t, err, ReasonInvalid)
		noExp := c
		noExp.ExpiresAt = nil
		_, err = f.svc.CheckDelegation(ctx, f.forge(noExp), alice, "review", f.pol())
		wantReason(t, err, ReasonInvalid)
	})

	t.Run("G4 audience or issuer of another node or brand", func(t *testing.T) {
		f := newFixture(t)
		tok, _ := f.grant(alice, "review", Month)
		c := f.claimsOf(tok.AccessToken)
		otherNode := c
		otherNode.Audience = jwt.ClaimStrings{"https://other.example/a2a/review/.well-known/agent-card.json"}
		_, err := f.svc.CheckDelegation(ctx, f.forge(otherNode), alice, "review", f.pol())
		wantReason(t, err, ReasonInvalid)
		otherIss := c
		otherIss.Issuer = "https://other.example"
		_, err = f.svc.CheckDelegation(ctx, f.forge(otherIss), alice, "review", f.pol())
		wantReason(t, err, ReasonInvalid)
		noAud := c
		noAud.Audience = nil
		_, err = f.svc.CheckDelegation(ctx, f.forge(noAud), alice, "review", f.pol())
		wantReason(t, err, ReasonInvalid)
		// A genuine token for review presented on fix.
		_, err = f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "fix", f.pol())
		wantReason(t, err, ReasonWrongBrand)
		_, err = f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "gone", f.pol())
		wantReason(t, err, ReasonWrongBrand)
	})

	t.Run("G5 scope beyond the grant", func(t *testing.T) {
		f := newFixture(t)
		tok, _ := f.grant(alice, "review", Month)
		c := f.claimsOf(tok.AccessToken)
		for _, scope := range []string{"review:read_only fix:read_write", "fix:read_write", ""} {
			wide := c
			wide.Scope = scope
			_, err := f.svc.CheckDelegation(ctx, f.forge(wide), alice, "review", f.pol())
			wantReason(t, err, ReasonInvalid)
		}
		// The policy widens the brand: the grant no longer covers it, at issuance and at use.
		b := reviewBrand()
		b.AccessMode = domain.ReadWrite
		f.setBrand(b)
		_, err := f.svc.Refresh(ctx, alice, "review", f.pol())
		wantOAuth(t, err, CodeInvalidGrant, 400)
		_, err = f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol())
		wantReason(t, err, ReasonRevoked)
		b = reviewBrand()
		b.Scope.ID = "review:all"
		f.setBrand(b)
		_, err = f.svc.Refresh(ctx, alice, "review", f.pol())
		wantOAuth(t, err, CodeInvalidGrant, 400)
		_, err = f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol())
		wantReason(t, err, ReasonRevoked)
		f.setBrand(reviewBrand())
		if _, err := f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol()); err != nil {
			t.Fatalf("policy restored: %v", err)
		}
	})

	t.Run("G6 no token from a token", func(t *testing.T) {
		f := newFixture(t)
		tok, _ := f.grant(alice, "review", Day)
		// The node's own tokens are no identity: nothing is minted or started for them.
		asIdentity := domain.Agent{Issuer: publicURL, Subject: "alice"}
		_, err := f.svc.Refresh(ctx, asIdentity, "review", f.pol())
		wantOAuth(t, err, CodeInvalidClient, 401)
		_, err = f.svc.StartFlow(ctx, domain.Agent{Issuer: publicURL + "/", Subject: "alice"}, "review:read_only", "", f.pol())
		wantOAuth(t, err, CodeInvalidClient, 401)
		// A token is not a scope either.
		_, err = f.svc.StartFlow(ctx, alice, tok.AccessToken, "", f.pol())
		wantOAuth(t, err, CodeInvalidScope, 400)
		// Holding review gives nothing on fix.
		_, err = f.svc.Refresh(ctx, alice, "fix", f.pol())
		wantOAuth(t, err, CodeInvalidGrant, 400)
		// Refreshed tokens never outlive their grant, and carry exactly its scope.
		f.clock.Advance(23*time.Hour + 30*time.Minute)
		fresh, err := f.svc.Refresh(ctx, alice, "review", f.pol())
		if err != nil {
			t.Fatal(err)
		}
		if fresh.ExpiresIn != 1800 || fresh.Scope != "review:read_only" {
			t.Errorf("refreshed token = %+v", fresh)
		}
		f.clock.Advance(30 * time.Minute)
		_, err = f.svc.Refresh(ctx, alice, "review", f.pol())
		wantOAuth(t, err, CodeInvalidGrant, 400)
		_, err = f.svc.CheckDelegation(ctx, fresh.AccessToken, alice, "review", f.pol())
		wantReason(t, err, ReasonExpired)
	})

	t.Run("G7 grant revoked, token unexpired", func(t *testing.T) {
		f := newFixture(t)
		tok, gid := f.grant(alice, "review", Forever)
		if _, err := f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol()); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Revoke(ctx, gid); err != nil {
			t.Fatal(err)
		}
		_, err := f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol())
		wantReason(t, err, ReasonRevoked)
	})

	t.Run("G8 stolen token", func(t *testing.T) {
		f := newFixture(t)
		tok, _ := f.grant(alice, "review", Month)
		for _, thief := range []domain.Agent{bob, mallory} {
			_, err := f.svc.CheckDelegation(ctx, tok.AccessToken, thief, "review", f.pol())
			wantReason(t, err, ReasonWrongAgent)
		}
		if gs, _ := f.svc.Grants(ctx); gs[0].Uses != 0 {
			t.Errorf("refused checks counted %d uses", gs[0].Uses)
		}
	})

	t.Run("G10 delegation request with the pact scope", func(t *testing.T) {
		f := newFixture(t)
		_, err := f.svc.StartFlow(ctx, alice, "review:read_only pact", "review", f.pol())
		wantOAuth(t, err, CodeInvalidScope, 400)
		_, err = f.svc.StartFlow(ctx, alice, "ｐａｃｔ", "", f.pol())
		wantOAuth(t, err, CodeInvalidScope, 400)
	})

	t.Run("G11 token reusable until expiry", func(t *testing.T) {
		f := newFixture(t)
		tok, _ := f.grant(alice, "review", Month)
		for i := range 3 {
			f.clock.Advance(10 * time.Minute)
			if _, err := f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol()); err != nil {
				t.Fatalf("use %d: %v", i+1, err)
			}
		}
		gs, _ := f.svc.Grants(ctx)
		if gs[0].Uses != 3 || gs[0].LastUsedAt == nil || !gs[0].LastUsedAt.Equal(f.clock.Now()) {
			t.Errorf("grant = %+v", gs[0])
		}
	})

	t.Run("G12 riding on a remembered check: a token changed by one byte, by another agent, after a revoke", func(t *testing.T) {
		f := newFixture(t)
		tok, gid := f.grant(alice, "review", Month)
		for range 2 { // the second check is answered from the remembered one
			if _, err := f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol()); err != nil {
				t.Fatal(err)
			}
		}
		sig, other := strings.LastIndexByte(tok.AccessToken, '.')+1, "A"
		if tok.AccessToken[sig] == 'A' {
			other = "B"
		}
		_, err := f.svc.CheckDelegation(ctx, tok.AccessToken[:sig]+other+tok.AccessToken[sig+1:], alice, "review", f.pol())
		wantReason(t, err, ReasonInvalid)
		_, err = f.svc.CheckDelegation(ctx, tok.AccessToken, bob, "review", f.pol())
		wantReason(t, err, ReasonWrongAgent)
		if _, err := f.svc.Revoke(ctx, gid); err != nil {
			t.Fatal(err)
		}
		_, err = f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol())
		wantReason(t, err, ReasonRevoked)
	})

	t.Run("grant expiry", func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.TokenTTL = 48 * time.Hour })
		tok, _ := f.grant(alice, "review", Day)
		if tok.ExpiresIn != 24*3600 {
			t.Errorf("token outlives its grant: %d s", tok.ExpiresIn)
		}
		// A token minted before a bug or a clock jump cannot outlive the grant either.
		c := f.claimsOf(tok.AccessToken)
		c.ExpiresAt = jwt.NewNumericDate(f.clock.Now().Add(48 * time.Hour))
		long := f.forge(c)
		f.clock.Advance(24 * time.Hour)
		_, err := f.svc.CheckDelegation(ctx, long, alice, "review", f.pol())
		wantReason(t, err, ReasonExpired)
		if gs, _ := f.svc.Grants(ctx); gs[0].Status != GrantExpired {
			t.Errorf("status = %s", gs[0].Status)
		}
	})
}
