package devices

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aether/aether/backend/devices/pushtest"
)

func TestPush(t *testing.T) {
	s, _, _ := open(t)
	ps := pushtest.NewService()
	defer ps.Close()
	code, _ := s.NewPairing()
	x, _, err := s.Pair(code, "nodeA", "pixel")
	if err != nil {
		t.Fatal(err)
	}
	br, sub := newBrowser(ps.URL + "/push/abc")
	if err := s.Subscribe(x.Device.ID, sub); err != nil {
		t.Fatal(err)
	}
	p := &Push{Store: s, Client: ps.Client(), Subscriber: "https://aether.tail-scale.ts.net"}
	n := Notice{ID: "req-1", Site: "example.com", Brand: "Code review", Code: "WDJB-MJHT"}
	sent, err := p.Send(context.Background(), n)
	if err != nil || sent != 1 {
		t.Fatalf("sent %d: %v", sent, err)
	}
	m := <-ps.Messages
	body := m.Body

	t.Run("O3 the push service sees only ciphertext", func(t *testing.T) {
		for _, secret := range []string{n.Code, n.Site, n.Brand, n.ID} {
			if bytes.Contains(body, []byte(secret)) {
				t.Fatalf("the push service read %q", secret)
			}
		}
		if ce := m.Header.Get("Content-Encoding"); ce != "aes128gcm" {
			t.Fatalf("Content-Encoding %q", ce)
		}
	})
	t.Run("O3 the device decrypts exactly the notice", func(t *testing.T) {
		var got map[string]any
		plain, err := br.Decrypt(body)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(plain, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"id": "req-1", "site": "example.com", "brand": "Code review", "code": "WDJB-MJHT"}
		if len(got) != len(want) {
			t.Fatalf("the notice says %v, want only %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%s = %v, want %v", k, got[k], v)
			}
		}
	})
	t.Run("the node signs with its VAPID key (RFC 8292)", func(t *testing.T) {
		auth := m.Header.Get("Authorization")
		tok, k, ok := strings.Cut(strings.TrimPrefix(auth, "vapid t="), ", k=")
		if !ok {
			t.Fatalf("Authorization %q", auth)
		}
		pub, _ := s.PublicKey()
		if k != pub {
			t.Fatalf("k=%s, want the node's key %s", k, pub)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(pub)
		ek, err := ecdh.P256().NewPublicKey(raw)
		if err != nil {
			t.Fatal(err)
		}
		ecdsaKey, err := ecdhToECDSA(ek)
		if err != nil {
			t.Fatal(err)
		}
		claims := jwt.MapClaims{}
		if _, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return ecdsaKey, nil }, jwt.WithValidMethods([]string{"ES256"})); err != nil {
			t.Fatalf("VAPID JWT: %v", err)
		}
		if claims["aud"] != ps.URL || claims["sub"] != "https://aether.tail-scale.ts.net" {
			t.Fatalf("VAPID claims %v", claims)
		}
	})
	t.Run("a subscription the push service says is gone is dropped", func(t *testing.T) {
		ps.Answer(http.StatusGone)
		if _, err := p.Send(context.Background(), n); err == nil {
			t.Fatal("no error for a gone subscription")
		}
		<-ps.Messages
		if s.List()[0].Push {
			t.Fatal("the gone subscription is kept")
		}
	})
	t.Run("a subscription that is not https or has bad keys is refused", func(t *testing.T) {
		_, bad := newBrowser("http://127.0.0.1/push")
		if err := s.Subscribe(x.Device.ID, bad); err == nil {
			t.Fatal("an http:// endpoint was taken")
		}
		_, bad = newBrowser(ps.URL)
		bad.Keys.Auth = "AAAA"
		if err := s.Subscribe(x.Device.ID, bad); err == nil {
			t.Fatal("a short auth secret was taken")
		}
	})
}

func ecdhToECDSA(k *ecdh.PublicKey) (*ecdsa.PublicKey, error) {
	return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), k.Bytes())
}

func newBrowser(endpoint string) (*pushtest.Browser, *Subscription) {
	b := pushtest.NewBrowser()
	sub := &Subscription{Endpoint: endpoint}
	sub.Keys.P256dh, sub.Keys.Auth = b.P256dh(), b.Auth()
	return b, sub
}
