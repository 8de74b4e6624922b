package agent

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/mod/sumdb/note"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
)

func newNodeKey(t *testing.T) *keys.Key {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return keys.FromPrivate(priv)
}

const testAnswer = "Looks good."

func signedReceipt(t *testing.T, k *keys.Key, edit func(*receipts.Claims)) string {
	t.Helper()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := receipts.Claims{
		RID: "r_1", Seq: 7, Prev: strings.Repeat("0", 64), Turn: "t_1", Task: "task-1", Ctx: "ctx-1",
		Brand: "review", Scope: "review:read_only", PactScope: store.PactScope, Grant: "g_1",
		Agent: domain.Agent{Issuer: "http://127.0.0.1:4000", Subject: "alice"},
		Ans:   receipts.HashBytes([]byte(testAnswer)), Status: domain.TurnCompleted,
		Started: now.Format("2006-01-02T15:04:05.000Z07:00"), Ended: now.Add(time.Second).Format("2006-01-02T15:04:05.000Z07:00"),
		Kid:              k.ID(),
		RegisteredClaims: jwt.RegisteredClaims{Issuer: "https://node.example", ID: "r_1", IssuedAt: jwt.NewNumericDate(now)},
	}
	if edit != nil {
		edit(&c)
	}
	jws, err := k.Sign(receipts.Typ, &c)
	if err != nil {
		t.Fatal(err)
	}
	return jws
}

func expectAll() ReceiptExpect {
	a := testAnswer
	return ReceiptExpect{Issuer: "https://node.example/", TaskID: "task-1", Brand: "review",
		Agent: domain.Agent{Issuer: "http://127.0.0.1:4000", Subject: "alice"}, Answer: &a}
}

func TestVerifyReceipt(t *testing.T) {
	k := newNodeKey(t)
	c, err := VerifyReceipt(signedReceipt(t, k, nil), keys.History{Set: k.Set()}, expectAll())
	if err != nil {
		t.Fatal(err)
	}
	if c.RID != "r_1" || c.Seq != 7 {
		t.Fatalf("claims = %+v", c)
	}
}

// The data part is the signed claims in camelCase; one that says anything else is refused.
func TestCheckReceiptData(t *testing.T) {
	jws := signedReceipt(t, newNodeKey(t), nil)
	data, err := receipts.DataPart(jws)
	if err != nil {
		t.Fatal(err)
	}
	var asSent map[string]any // as the agent gets it: through JSON
	json.Unmarshal(mustJSON(t, data), &asSent)
	if err := CheckReceiptData(asSent, jws); err != nil {
		t.Fatalf("the node's data part: %v", err)
	}
	if _, ok := asSent["pactScope"]; !ok {
		t.Fatalf("data part without pactScope: %v", asSent)
	}
	asSent["grantRevoked"] = true
	if err := CheckReceiptData(asSent, jws); err == nil || !strings.Contains(err.Error(), "not its signed claims") {
		t.Errorf("a data part saying grantRevoked true of a receipt that does not: %v", err)
	}
}

func TestVerifyReceiptRefuses(t *testing.T) {
	k := newNodeKey(t)
	good := signedReceipt(t, k, nil)
	other := newNodeKey(t)
	tampered := func() string {
		parts := strings.Split(good, ".")
		var m map[string]any
		raw, _ := jwtSegment(parts[1])
		json.Unmarshal(raw, &m)
		m["seq"] = 8
		parts[1] = b64(string(mustJSON(t, m)))
		return strings.Join(parts, ".")
	}()
	wrongAnswer := "Looks bad."
	cases := map[string]struct {
		jws  string
		set  keys.Set
		want func(*ReceiptExpect)
	}{
		"T7 signed by another key": {signedReceipt(t, other, func(c *receipts.Claims) { c.Kid = other.ID() }), k.Set(), nil},
		"T1 edited claims":         {tampered, k.Set(), nil},
		"other task":               {good, k.Set(), func(e *ReceiptExpect) { e.TaskID = "task-2" }},
		"other brand":              {good, k.Set(), func(e *ReceiptExpect) { e.Brand = "deploy" }},
		"other agent":              {good, k.Set(), func(e *ReceiptExpect) { e.Agent.Subject = "bob" }},
		"other agent issuer":       {good, k.Set(), func(e *ReceiptExpect) { e.Agent.Issuer = "https://idp.example" }},
		"other node":               {good, k.Set(), func(e *ReceiptExpect) { e.Issuer = "https://evil.example" }},
		"answer not receipted":     {good, k.Set(), func(e *ReceiptExpect) { e.Answer = &wrongAnswer }},
		"not a receipt typ": {func() string {
			s, _ := k.Sign("JWT", jwt.RegisteredClaims{Issuer: "https://node.example"})
			return s
		}(), k.Set(), nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			want := expectAll()
			if c.want != nil {
				c.want(&want)
			}
			if _, err := VerifyReceipt(c.jws, keys.History{Set: c.set}, want); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func jwtSegment(s string) ([]byte, error) {
	return jwt.NewParser().DecodeSegment(s)
}

func TestNodeKeys(t *testing.T) {
	k := newNodeKey(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(k.Set().JWKS())
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	set, err := (&Client{}).NodeKeys(context.Background(), srv.URL+"/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyReceipt(signedReceipt(t, k, nil), set, ReceiptExpect{TaskID: "task-1"}); err != nil {
		t.Fatalf("receipt with fetched keys: %v", err)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`))
	}))
	defer bad.Close()
	if _, err := (&Client{}).NodeKeys(context.Background(), bad.URL); err == nil {
		t.Fatal("a JWKS with no Ed25519 key was accepted")
	}
}

// The agent bounds a retired key by the rotation statement the node's JWKS carries with it:
// whoever kept the old node.key cannot make it sign a receipt the agent takes.
func TestVerifyReceiptRetiredKey(t *testing.T) {
	old, at, nodeKeys := rotatedNodeKeys(t)
	signed := func(seq int64, iat time.Time) string {
		return signedReceipt(t, old, func(c *receipts.Claims) { c.Seq, c.IssuedAt = seq, jwt.NewNumericDate(iat) })
	}
	if _, err := VerifyReceipt(signed(7, at.Add(-time.Minute)), nodeKeys, expectAll()); err != nil {
		t.Fatalf("the old key's last receipt before its rotation: %v", err)
	}
	for name, c := range map[string]struct {
		jws, why string
	}{
		"T13 the retired key numbers a receipt after its rotation": {signed(8, at), "seq 8 is after the rotation"},
		"T13 the retired key dates a receipt after its rotation":   {signed(5, at.Add(time.Minute)), "which a rotation retired at"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := VerifyReceipt(c.jws, keys.History{Set: nodeKeys.Set}, expectAll()); err != nil {
				t.Fatalf("without the statement the forged receipt is well signed: %v", err)
			}
			if _, err := VerifyReceipt(c.jws, nodeKeys, expectAll()); err == nil || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("got %v, want %q", err, c.why)
			}
		})
	}
}

// The agent bounds a checkpoint signed by a retired key the same way: whoever kept the old
// node.key cannot sign a log that grew after its rotation and have an agent hold it.
func TestCheckpointRetiredKey(t *testing.T) {
	old, _, nodeKeys := rotatedNodeKeys(t)
	checkpoint := func(size int64) []byte {
		text := fmt.Sprintf("node.example/log\n%d\n%s\n", size, base64.StdEncoding.EncodeToString(make([]byte, 32)))
		n, err := note.Sign(&note.Note{Text: text}, old.NoteSigner("node.example/log"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	peer := func(size int64) error {
		return testLogCheck(t, "http://node.example", nodeKeys, t.TempDir()).Before(context.Background(), checkpoint(size))
	}
	if err := peer(7); err != nil {
		t.Fatalf("the old key's checkpoint of its last receipt: %v", err)
	}
	t.Run("T13 the retired key signs a checkpoint of a log that grew after its rotation", func(t *testing.T) {
		if err := testLogCheck(t, "http://node.example", keys.History{Set: nodeKeys.Set}, t.TempDir()).Before(context.Background(), checkpoint(8)); err != nil {
			t.Fatalf("without the statement the forged checkpoint is well signed: %v", err)
		}
		if err := peer(8); err == nil || !strings.Contains(err.Error(), "a retired key signs nothing after its rotation") {
			t.Fatalf("got %v, want the checkpoint of 8 receipts refused", err)
		}
	})
}

// rotatedNodeKeys rotates a fresh data dir's key at seq 7, an hour ago, and returns the retired
// key, the rotation's time and the node's keys as an agent reads them from its JWKS.
func rotatedNodeKeys(t *testing.T) (*keys.Key, time.Time, keys.History) {
	t.Helper()
	dir := t.TempDir()
	ring, err := keys.LoadRing(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := ring.Current
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	if _, _, err := keys.Rotate(dir, at, 7); err != nil {
		t.Fatal(err)
	}
	if ring, err = keys.LoadRing(dir); err != nil {
		t.Fatal(err)
	}
	hist, err := ring.VerifyRotations(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(hist.JWKS())
	}))
	defer srv.Close()
	nodeKeys, err := (&Client{}).NodeKeys(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return old, at, nodeKeys
}
