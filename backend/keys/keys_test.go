package keys

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestLoadOrCreateKeepsTheKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.key")
	k1, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", fi.Mode())
	}
	k2, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	if k1.ID() != k2.ID() || !k1.Public().Equal(k2.Public()) {
		t.Fatal("the key changed across loads")
	}
	os.WriteFile(path, []byte("not a key"), 0o600)
	if _, err := LoadOrCreate(path); err == nil {
		t.Fatal("a damaged key file was accepted")
	}
}

func TestSignVerify(t *testing.T) {
	k, _ := LoadOrCreate(filepath.Join(t.TempDir(), "k"))
	other, _ := LoadOrCreate(filepath.Join(t.TempDir(), "k"))
	tok, err := k.Sign("pact-test+jwt", jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Minute).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	var c jwt.MapClaims
	if err := k.Set().Verify(tok, "pact-test+jwt", &c); err != nil || c["sub"] != "alice" {
		t.Fatalf("verify: %v %v", err, c)
	}
	for name, check := range map[string]func() error{
		"wrong typ":      func() error { return k.Set().Verify(tok, "pact-other+jwt", &jwt.MapClaims{}) },
		"another node":   func() error { return other.Set().Verify(tok, "pact-test+jwt", &jwt.MapClaims{}) },
		"tampered claim": func() error { return k.Set().Verify(tamper(tok), "pact-test+jwt", &jwt.MapClaims{}) },
		"alg none": func() error {
			none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "x"}).SignedString(jwt.UnsafeAllowNoneSignatureType)
			return k.Set().Verify(none, "pact-test+jwt", &jwt.MapClaims{})
		},
	} {
		if err := check(); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	parts[1] = parts[1][:len(parts[1])-2] + "AA"
	return strings.Join(parts, ".")
}

func TestJWKSRoundTrip(t *testing.T) {
	k, _ := LoadOrCreate(filepath.Join(t.TempDir(), "k"))
	data, _ := json.Marshal(k.Set().JWKS())
	set, err := ParseJWKS(data)
	if err != nil || len(set) != 1 || !set[k.ID()].Equal(k.Public()) {
		t.Fatalf("round trip: %v %v", set, err)
	}
	// A kid that is not the key's thumbprint is refused: it would let a JWKS
	// alias one key under another's id.
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	bad := strings.Replace(string(data), k.ID(), Thumbprint(pub), 1)
	if _, err := ParseJWKS([]byte(bad)); err == nil {
		t.Fatal("a JWKS whose kid is not the thumbprint was accepted")
	}
}

func TestAdminCertificate(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key")
	now := time.Now()
	c1, err := LoadOrCreateTLS(cert, key, now)
	if err != nil {
		t.Fatal(err)
	}
	if ips := c1.Leaf.IPAddresses; len(ips) != 2 || c1.Leaf.DNSNames[0] != "localhost" {
		t.Fatalf("SANs %v %v", ips, c1.Leaf.DNSNames)
	}
	c2, _ := LoadOrCreateTLS(cert, key, now.Add(24*time.Hour))
	if string(c2.Leaf.Raw) != string(c1.Leaf.Raw) {
		t.Fatal("a valid certificate was replaced")
	}
	// Within 30 days of expiry it is renewed.
	c3, _ := LoadOrCreateTLS(cert, key, c1.Leaf.NotAfter.Add(-24*time.Hour))
	if string(c3.Leaf.Raw) == string(c1.Leaf.Raw) {
		t.Fatal("a certificate about to expire was kept")
	}
	if fi, _ := os.Stat(key); fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v", fi.Mode())
	}
}
