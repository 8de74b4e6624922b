package identity

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/aether/aether/backend/identity/identitytest"
	"github.com/golang-jwt/jwt/v5"
)

// b2Setup returns a verifier with a warm key cache and a token it accepts, plus the key.
func b2Setup(tb testing.TB) (*Verifier, string, any) {
	tb.Helper()
	is := identitytest.NewIssuer(tb)
	v := New(Config{Audience: testAud, AllowInsecureLocalIssuers: true})
	tb.Cleanup(v.fetches.Wait)
	tok := is.Token("alice", testAud)
	if _, err := v.Verify(context.Background(), tok, "192.0.2.1"); err != nil {
		tb.Fatalf("warm-up: %v", err)
	}
	return v, tok, is.Keys()[0].Public()
}

func benchVerifyWarm(v *Verifier, tok string) func(*testing.B) {
	return func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Verify(ctx, tok, "192.0.2.1"); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchJWTParse(tok string, key any) func(*testing.B) {
	return func(b *testing.B) {
		keyfunc := func(*jwt.Token) (any, error) { return key, nil }
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jwt.Parse(tok, keyfunc); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkVerifyWarm is B2's measured side: a full identity check with the issuer's keys cached.
func BenchmarkVerifyWarm(b *testing.B) {
	v, tok, _ := b2Setup(b)
	benchVerifyWarm(v, tok)(b)
}

// BenchmarkJWTParseBaseline is B2's baseline: jwt.Parse of the same token with the key in hand.
func BenchmarkJWTParseBaseline(b *testing.B) {
	_, tok, key := b2Setup(b)
	benchJWTParse(tok, key)(b)
}

// TestPrintB2 prints the B2 line for `make bench` when AETHER_BENCH=1.
func TestPrintB2(t *testing.T) {
	if os.Getenv("AETHER_BENCH") != "1" {
		t.Skip("set AETHER_BENCH=1 to run the B2 benchmark")
	}
	v, tok, key := b2Setup(t)
	ours := testing.Benchmark(benchVerifyWarm(v, tok))
	base := testing.Benchmark(benchJWTParse(tok, key))
	o, b := float64(ours.T.Nanoseconds())/float64(ours.N), float64(base.T.Nanoseconds())/float64(base.N)
	fmt.Printf("B2 ours=%.0fns baseline=%.0fns ratio=%.2f\n", o, b, o/b)
}
