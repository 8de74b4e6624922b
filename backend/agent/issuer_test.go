package agent

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/keys"
)

func openIssuer(t *testing.T, dir string, o IssuerOptions) *LocalIssuer {
	t.Helper()
	li, err := OpenLocalIssuer(dir, o)
	if err != nil {
		t.Fatalf("OpenLocalIssuer: %v", err)
	}
	t.Cleanup(func() { li.Close() })
	return li
}

func verifier(aud string) *identity.Verifier {
	return identity.New(identity.Config{Audience: aud, AllowInsecureLocalIssuers: true})
}

func TestLocalIssuerTokensVerifyWithIdentity(t *testing.T) {
	dir := t.TempDir()
	li := openIssuer(t, dir, IssuerOptions{})
	if !strings.HasPrefix(li.URL(), "http://127.0.0.1:") {
		t.Fatalf("issuer URL %q, want http://127.0.0.1:<port>", li.URL())
	}
	const aud = "https://node.example"
	tok, err := li.Mint("alice", aud)
	if err != nil {
		t.Fatal(err)
	}
	id, err := verifier(aud).Verify(context.Background(), tok, "127.0.0.1")
	if err != nil {
		t.Fatalf("identity.Verify refused a minted token: %v", err)
	}
	if id.Issuer != li.URL() || id.Subject != "alice" {
		t.Fatalf("identity = %+v, want iss %s sub alice", id, li.URL())
	}
	who, err := PeekIdentity(tok)
	if err != nil {
		t.Fatal(err)
	}
	if who.Issuer != li.URL() || who.Subject != "alice" || len(who.Audience) != 1 || who.Audience[0] != aud {
		t.Fatalf("PeekIdentity = %+v", who)
	}
	if _, err := verifier("https://other.example").Verify(context.Background(), tok, "127.0.0.1"); err == nil {
		t.Fatal("a token for another audience was accepted")
	}
}

func TestLocalIssuerDocuments(t *testing.T) {
	dir := t.TempDir()
	li := openIssuer(t, dir, IssuerOptions{})
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	getJSON(t, li.URL()+discoveryPath, &disc)
	if disc.Issuer != li.URL() || disc.JWKSURI != li.URL()+jwksPath {
		t.Fatalf("discovery = %+v", disc)
	}
	var meta struct {
		Issuer string `json:"issuer"`
	}
	getJSON(t, li.URL()+metadataPath, &meta)
	if meta.Issuer != li.URL() {
		t.Fatalf("RFC 8414 metadata issuer = %q", meta.Issuer)
	}
	resp, err := http.Get(disc.JWKSURI)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	// keys.ParseJWKS insists that kid is the RFC 7638 thumbprint of the key.
	set, err := keys.ParseJWKS(raw)
	if err != nil {
		t.Fatalf("JWKS: %v", err)
	}
	pub, ok := set[li.KeyID()]
	if !ok || len(set) != 1 || keys.Thumbprint(pub) != li.KeyID() {
		t.Fatalf("JWKS keys %v, want exactly kid %s (its thumbprint)", set, li.KeyID())
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(filepath.Join(dir, issuerKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
		}
	}
}

func TestLocalIssuerKeepsItsIdentityAcrossRuns(t *testing.T) {
	dir := t.TempDir()
	first, err := OpenLocalIssuer(dir, IssuerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url, kid := first.URL(), first.KeyID()
	first.Close()
	again := openIssuer(t, dir, IssuerOptions{})
	if again.URL() != url || again.KeyID() != kid {
		t.Fatalf("reopened issuer is %s / %s, want the same %s / %s", again.URL(), again.KeyID(), url, kid)
	}
	if !again.Serving() {
		t.Fatal("reopened issuer does not serve")
	}
}

func TestLocalIssuerSharesAnAddressServedByAnotherRun(t *testing.T) {
	dir := t.TempDir()
	serving := openIssuer(t, dir, IssuerOptions{})
	second := openIssuer(t, dir, IssuerOptions{})
	if second.Serving() || second.URL() != serving.URL() {
		t.Fatalf("second run: serving=%v url=%s, want a non-serving issuer at %s", second.Serving(), second.URL(), serving.URL())
	}
	tok, err := second.Mint("alice", "https://node.example")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifier("https://node.example").Verify(context.Background(), tok, "127.0.0.1"); err != nil {
		t.Fatalf("token of the second run: %v", err)
	}
}

func TestLocalIssuerAddressTakenByAnotherProgram(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go http.Serve(ln, http.NotFoundHandler())
	_, err = OpenLocalIssuer(t.TempDir(), IssuerOptions{Addr: ln.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "new agent identity") {
		t.Fatalf("err = %v, want a clear listen error", err)
	}
}

func TestLocalIssuerRefusesNonLoopbackAddress(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:9000", "example.com:80", "nonsense"} {
		if _, err := OpenLocalIssuer(t.TempDir(), IssuerOptions{Addr: addr}); err == nil {
			t.Errorf("address %q accepted", addr)
		}
	}
}

func TestLocalIssuerTokenLifetimeAndRenewal(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	li := openIssuer(t, t.TempDir(), IssuerOptions{Now: func() time.Time { return now }})
	src := li.Source("alice", "https://node.example")
	a, err := src.IdentityToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	who, _ := PeekIdentity(a)
	if got := who.ExpiresAt.Sub(now); got != IdentityTTL || IdentityTTL > 5*time.Minute {
		t.Fatalf("lifetime %v, want %v (at most 5 min)", got, IdentityTTL)
	}
	now = now.Add(IdentityTTL - 2*time.Minute)
	if b, _ := src.IdentityToken(context.Background()); b != a {
		t.Fatal("a token with minutes left was not reused")
	}
	now = now.Add(90 * time.Second)
	b, _ := src.IdentityToken(context.Background())
	if b == a {
		t.Fatal("a token in its last minute was reused")
	}
}

func TestPeekIdentityRefusesJunk(t *testing.T) {
	for _, tok := range []string{"", "a.b", "x.!!!.y", "x." + b64(`{"sub":"a"}`) + ".y", "x." + b64(`[1]`) + ".y"} {
		if _, err := PeekIdentity(tok); err == nil {
			t.Errorf("PeekIdentity(%q) succeeded", tok)
		}
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}
