package receipts

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aether/aether/backend/store"
	"github.com/golang-jwt/jwt/v5"
)

func TestHashJSON(t *testing.T) {
	type msg struct {
		B string         `json:"b"`
		A map[string]any `json:"a"`
	}
	h1, err := HashJSON(msg{B: "<x>", A: map[string]any{"z": 1.5, "y": []int{1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	json.Unmarshal([]byte(`{"a": {"y": [1, 2], "z": 1.5}, "b": "<x>"}`), &generic)
	h2, _ := HashJSON(generic)
	if h1 != h2 {
		t.Errorf("key order changed the hash: %s vs %s", h1, h2)
	}
	if want := HashBytes([]byte(`{"a":{"y":[1,2],"z":1.5},"b":"<x>"}`)); h1 != want {
		t.Errorf("HashJSON = %s, want hash of the sorted compact form %s", h1, want)
	}
	if _, err := HashJSON(func() {}); err == nil {
		t.Error("hashed a func")
	}
}

func TestAppendThousandVerifies(t *testing.T) {
	e := newEnv(t)
	got := e.run(0, 1000, 32)
	rows := e.rows()
	if len(rows) != 1000 {
		t.Fatalf("%d rows", len(rows))
	}
	seqs := map[int64]bool{}
	for i, r := range got {
		if seqs[r.Seq] {
			t.Fatalf("seq %d handed out twice", r.Seq)
		}
		seqs[r.Seq] = true
		row := rows[r.Seq-1]
		if row.ID != r.ID || row.Hash != r.Hash || row.JWS != r.JWS || row.TurnID != testTurn(i).ID {
			t.Fatalf("Append returned %+v, stored %+v", r, row)
		}
	}
	wantOK(t, e.verify(VerifyOptions{Issuer: testIssuer}), 1000)
	c, err := VerifyOne(rows[499].JWS, only(e.key.Set()))
	if err != nil {
		t.Fatal(err)
	}
	i, _ := strconv.Atoi(strings.TrimPrefix(c.Turn, "turn-"))
	tr := testTurn(i)
	if c.Seq != 500 || c.Prev != rows[498].Hash || c.Task != tr.TaskID || c.Agent != tr.Agent || c.Req != tr.RequestHash ||
		c.Ans != tr.AnswerHash || c.Policy != "policy-1" || c.PactScope != "pact" || c.Scope != "acme.read" ||
		c.Started != formatTime(tr.StartedAt) || c.Ended != formatTime(tr.EndedAt) || c.Usage != tr.Usage ||
		c.Kid != e.key.ID() || c.Issuer != testIssuer || c.ID != c.RID || !strings.HasPrefix(c.RID, "r_") {
		t.Errorf("claims = %+v", c)
	}
	if first, _ := VerifyOne(rows[0].JWS, only(e.key.Set())); first.Prev != Genesis(e.key.ID()) {
		t.Errorf("first prev = %s, want genesis", first.Prev)
	}
}

func TestConcurrentAppendsGapless(t *testing.T) {
	e := newEnv(t)
	const n = 32 * 8
	ctx := context.Background()
	for i := range n {
		if err := e.l.Start(ctx, testTurn(i)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				if _, err := e.l.Append(ctx, testTurn(i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, r := range e.rows() {
		if r.Seq != int64(i+1) {
			t.Fatalf("row %d has seq %d", i, r.Seq)
		}
	}
	wantOK(t, e.verify(VerifyOptions{}), n)
}

func TestReopenKeepsChain(t *testing.T) {
	e := newEnv(t)
	e.run(0, 10, 4)
	e.reopen()
	wantOK(t, e.verify(VerifyOptions{}), 10)
	got := e.run(10, 15, 1)
	if got[10].Seq != 11 || got[14].Seq != 15 {
		t.Errorf("after reopen: seq %d..%d", got[10].Seq, got[14].Seq)
	}
	e.reopen()
	wantOK(t, e.verify(VerifyOptions{}), 15)
	r, err := e.l.Get(context.Background(), got[12].ID)
	if err != nil || r.Claims.Turn != testTurn(12).ID || r.JWS != got[12].JWS {
		t.Errorf("Get = %+v, %v", r, err)
	}
}

func TestAppendChecksTurns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	bad := testTurn(1)
	bad.Status = "running"
	if _, err := e.l.Append(ctx, bad); err == nil {
		t.Error("appended a running turn")
	}
	bad = testTurn(1)
	bad.GrantID = ""
	if err := e.l.Start(ctx, bad); err == nil {
		t.Error("started a turn with no grant")
	}
	bad = testTurn(1)
	bad.EndedAt = bad.StartedAt.Add(-1e9)
	if _, err := e.l.Append(ctx, bad); err == nil {
		t.Error("appended a turn that ends before it starts")
	}
	// A turn never started, and one that differs from its start, fail alone:
	// the good turns batched with them still get their receipts.
	for i := range 20 {
		if err := e.l.Start(ctx, testTurn(i)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 22)
	for i := range 22 {
		wg.Go(func() {
			tr := testTurn(i)
			if i == 21 {
				tr = testTurn(5)
				tr.ID = "turn-other"
			}
			if i == 5 {
				tr.Brand = "globex"
			}
			_, errs[i] = e.l.Append(ctx, tr)
		})
	}
	wg.Wait()
	for i, err := range errs {
		switch i {
		case 20, 21:
			if !errors.Is(err, store.ErrTurnNotFound) {
				t.Errorf("turn %d never started: %v", i, err)
			}
		case 5:
			if !errors.Is(err, store.ErrTurnMismatch) {
				t.Errorf("turn 5 with another brand: %v", err)
			}
		default:
			if err != nil {
				t.Errorf("turn %d: %v", i, err)
			}
		}
	}
	wantOK(t, e.verify(VerifyOptions{}), 19)
}

func TestCloseDrains(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := range 200 {
		if err := e.l.Start(ctx, testTurn(i)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := map[string]bool{}
	for i := range 200 {
		wg.Go(func() {
			r, err := e.l.Append(ctx, testTurn(i))
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Error(err)
			}
			if err == nil {
				mu.Lock()
				done[r.ID] = true
				mu.Unlock()
			}
		})
	}
	e.l.Close()
	wg.Wait()
	if _, err := e.l.Append(ctx, testTurn(0)); !errors.Is(err, ErrClosed) {
		t.Errorf("append after close: %v", err)
	}
	e.reopen()
	rows := e.rows()
	for _, r := range rows {
		delete(done, r.ID)
	}
	if len(done) != 0 {
		t.Errorf("%d receipts returned but not stored", len(done))
	}
	wantOK(t, e.verify(VerifyOptions{}), len(rows))
}

func TestListAndGet(t *testing.T) {
	e := newEnv(t)
	e.run(0, 30, 4)
	ctx := context.Background()
	page, next, err := e.l.List(ctx, store.ReceiptFilter{Agent: "USER-1", Limit: 4})
	if err != nil || len(page) != 4 || next != page[3].Seq {
		t.Fatalf("List = %d, %d, %v", len(page), next, err)
	}
	for i, r := range page {
		if r.Claims.Agent.Subject != "user-1" || (i > 0 && r.Seq >= page[i-1].Seq) {
			t.Errorf("page[%d] = %+v", i, r)
		}
	}
	if _, err := e.l.Get(ctx, "r_missing"); !errors.Is(err, store.ErrReceiptNotFound) {
		t.Errorf("Get(missing) = %v", err)
	}
}

func TestVerifyOneRejects(t *testing.T) {
	e := newEnv(t)
	good := e.run(0, 1, 1)[0]
	set := only(e.key.Set())
	if _, err := VerifyOne(good.JWS, set); err != nil {
		t.Fatal(err)
	}
	signed := func(typ string, edit func(*Claims)) string {
		c := good.Claims
		edit(&c)
		s, err := e.key.Sign(typ, c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, good.Claims)
	hs.Header["kid"], hs.Header["typ"] = e.key.ID(), Typ
	hsJWS, _ := hs.SignedString([]byte("secret"))
	none := jwt.NewWithClaims(jwt.SigningMethodNone, good.Claims)
	none.Header["kid"], none.Header["typ"] = e.key.ID(), Typ
	noneJWS, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	cases := map[string]string{
		"T7 alg HS256":         hsJWS,
		"T7 alg none":          noneJWS,
		"T7 unknown kid":       signedBy(t, testKey(9), good.Claims),
		"wrong typ":            signed("JWT", func(*Claims) {}),
		"kid claim not signer": signed(Typ, func(c *Claims) { c.Kid = "other" }),
		"pact_scope":           signed(Typ, func(c *Claims) { c.PactScope = "acme" }),
		"bad status":           signed(Typ, func(c *Claims) { c.Status = "running" }),
		"bad time":             signed(Typ, func(c *Claims) { c.Ended = "yesterday" }),
		"not a JWS":            "abc",
	}
	for name, jws := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := VerifyOne(jws, set); err == nil {
				t.Error("verified")
			}
		})
	}
}

// signedBy re-signs claims as another node would (its kid in the claims too).
func signedBy(t testing.TB, k interface {
	ID() string
	Sign(string, jwt.Claims) (string, error)
}, c Claims) string {
	t.Helper()
	c.Kid = k.ID()
	s, err := k.Sign(Typ, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
