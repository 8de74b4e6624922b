package devices

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// browser is what a browser keeps of a push subscription: its ECDH key and auth secret.
type browser struct {
	key  *ecdh.PrivateKey
	auth []byte
}

func newBrowser(t *testing.T, endpoint string) (*browser, *Subscription) {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{key: k, auth: make([]byte, 16)}
	rand.Read(b.auth)
	sub := &Subscription{Endpoint: endpoint}
	sub.Keys.P256dh = base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes())
	sub.Keys.Auth = base64.RawURLEncoding.EncodeToString(b.auth)
	return b, sub
}

// decrypt reads an aes128gcm push message (RFC 8188) encrypted for b (RFC 8291 section 3.4).
func (b *browser) decrypt(t *testing.T, body []byte) []byte {
	t.Helper()
	if len(body) < 21 {
		t.Fatalf("a %d-byte message has no aes128gcm header", len(body))
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if idlen != 65 || len(body) < 21+idlen {
		t.Fatalf("keyid of %d bytes, want the sender's 65-byte public key", idlen)
	}
	senderPub, ct := body[21:21+idlen], body[21+idlen:]
	if uint32(len(ct)) > rs {
		t.Fatalf("more than one record (%d bytes, rs %d)", len(ct), rs)
	}
	as, err := ecdh.P256().NewPublicKey(senderPub)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := b.key.ECDH(as)
	if err != nil {
		t.Fatal(err)
	}
	keyInfo := append(append([]byte("WebPush: info\x00"), b.key.PublicKey().Bytes()...), senderPub...)
	ikm := expand(t, extract(t, shared, b.auth), string(keyInfo), 32)
	prk := extract(t, ikm, salt)
	cek := expand(t, prk, "Content-Encoding: aes128gcm\x00", 16)
	nonce := expand(t, prk, "Content-Encoding: nonce\x00", 12)
	blk, _ := aes.NewCipher(cek)
	gcm, _ := cipher.NewGCM(blk)
	plain, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		t.Fatalf("the message does not decrypt with the subscription's keys: %v", err)
	}
	plain = bytes.TrimRight(plain, "\x00")
	if len(plain) == 0 || plain[len(plain)-1] != 2 {
		t.Fatal("the last record has no 0x02 delimiter")
	}
	return plain[:len(plain)-1]
}

func extract(t *testing.T, secret, salt []byte) []byte {
	prk, err := hkdf.Extract(sha256.New, secret, salt)
	if err != nil {
		t.Fatal(err)
	}
	return prk
}

func expand(t *testing.T, prk []byte, info string, n int) []byte {
	out, err := hkdf.Expand(sha256.New, prk, info, n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pushService is an RFC 8030 push service on loopback that keeps what it was sent.
type pushService struct {
	srv  *httptest.Server
	got  chan *http.Request
	body chan []byte
	code int
}

func newPushService(t *testing.T, code int) *pushService {
	p := &pushService{got: make(chan *http.Request, 4), body: make(chan []byte, 4), code: code}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		p.got <- r
		p.body <- b
		w.WriteHeader(p.code)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func TestPush(t *testing.T) {
	s, _, _ := open(t)
	ps := newPushService(t, http.StatusCreated)
	code, _ := s.NewPairing()
	x, _, err := s.Pair(code, "nodeA", "pixel")
	if err != nil {
		t.Fatal(err)
	}
	br, sub := newBrowser(t, ps.srv.URL+"/push/abc")
	if err := s.Subscribe(x.Device.ID, sub); err != nil {
		t.Fatal(err)
	}
	p := &Push{Store: s, Client: ps.srv.Client(), Subscriber: "https://aether.tail-scale.ts.net"}
	n := Notice{ID: "req-1", Site: "example.com", Brand: "Code review", Code: "WDJB-MJHT"}
	sent, err := p.Send(context.Background(), n)
	if err != nil || sent != 1 {
		t.Fatalf("sent %d: %v", sent, err)
	}
	r, body := <-ps.got, <-ps.body

	t.Run("O3 the push service sees only ciphertext", func(t *testing.T) {
		for _, secret := range []string{n.Code, n.Site, n.Brand, n.ID} {
			if bytes.Contains(body, []byte(secret)) {
				t.Fatalf("the push service read %q", secret)
			}
		}
		if ce := r.Header.Get("Content-Encoding"); ce != "aes128gcm" {
			t.Fatalf("Content-Encoding %q", ce)
		}
	})
	t.Run("O3 the device decrypts exactly the notice", func(t *testing.T) {
		var got map[string]any
		if err := json.Unmarshal(br.decrypt(t, body), &got); err != nil {
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
		auth := r.Header.Get("Authorization")
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
		if claims["aud"] != ps.srv.URL || claims["sub"] != "https://aether.tail-scale.ts.net" {
			t.Fatalf("VAPID claims %v", claims)
		}
	})
	t.Run("a subscription the push service says is gone is dropped", func(t *testing.T) {
		ps.code = http.StatusGone
		if _, err := p.Send(context.Background(), n); err == nil {
			t.Fatal("no error for a gone subscription")
		}
		<-ps.got
		<-ps.body
		if s.List()[0].Push {
			t.Fatal("the gone subscription is kept")
		}
	})
	t.Run("a subscription that is not https or has bad keys is refused", func(t *testing.T) {
		_, bad := newBrowser(t, "http://127.0.0.1/push")
		if err := s.Subscribe(x.Device.ID, bad); err == nil {
			t.Fatal("an http:// endpoint was taken")
		}
		_, bad = newBrowser(t, ps.srv.URL)
		bad.Keys.Auth = "AAAA"
		if err := s.Subscribe(x.Device.ID, bad); err == nil {
			t.Fatal("a short auth secret was taken")
		}
	})
}

func ecdhToECDSA(k *ecdh.PublicKey) (*ecdsa.PublicKey, error) {
	return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), k.Bytes())
}
