package identity

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/aether/aether/backend/identity/identitytest"
	"github.com/golang-jwt/jwt/v5"
)

// b2Setup returns a verifier with a warm key cache, the issuer and its key.
func b2Setup(tb testing.TB) (*Verifier, *identitytest.Issuer, any) {
	tb.Helper()
	is := identitytest.NewIssuer(tb)
	v := New(Config{Audience: testAud, AllowInsecureLocalIssuers: true})
	tb.Cleanup(v.fetches.Wait)
	if _, err := v.Verify(context.Background(), is.Token("warm-up", testAud), "192.0.2.1"); err != nil {
		tb.Fatalf("warm-up: %v", err)
	}
	return v, is, is.Keys()[0].Public()
}

// minted numbers every token b2Tokens makes, so no two are alike.
var minted atomic.Int64

// b2Tokens mints n tokens, each unlike any before: tokens the verifier has never seen.
func b2Tokens(is *identitytest.Issuer, n int) []string {
	toks := make([]string, n)
	for i := range toks {
		c := is.Claims("alice", testAud)
		c["jti"] = fmt.Sprint("b2-", minted.Add(1))
		toks[i] = is.Sign(c)
	}
	return toks
}

// benchVerify checks one token per iteration, each from tokens(b.N), minted before the clock starts.
func benchVerify(v *Verifier, tokens func(n int) []string) func(*testing.B) {
	return func(b *testing.B) {
		toks := tokens(b.N)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := v.Verify(ctx, toks[i], "192.0.2.1"); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchJWTParse(tokens func(n int) []string, key any) func(*testing.B) {
	return func(b *testing.B) {
		toks := tokens(b.N)
		keyfunc := func(*jwt.Token) (any, error) { return key, nil }
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := jwt.Parse(toks[i], keyfunc); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// same is n times one token.
func same(tok string) func(n int) []string {
	return func(n int) []string {
		toks := make([]string, n)
		for i := range toks {
			toks[i] = tok
		}
		return toks
	}
}

// BenchmarkVerifyFirst is B2's measured side: the full check of a token not seen before, with
// the issuer's keys cached.
func BenchmarkVerifyFirst(b *testing.B) {
	v, is, _ := b2Setup(b)
	benchVerify(v, func(n int) []string { return b2Tokens(is, n) })(b)
}

// BenchmarkVerifyAgain is the check of a token accepted before (remembered).
func BenchmarkVerifyAgain(b *testing.B) {
	v, is, _ := b2Setup(b)
	benchVerify(v, same(is.Token("warm-up", testAud)))(b)
}

// BenchmarkJWTParseBaseline is B2's baseline: jwt.Parse of the same tokens with the key in hand.
func BenchmarkJWTParseBaseline(b *testing.B) {
	_, is, key := b2Setup(b)
	benchJWTParse(func(n int) []string { return b2Tokens(is, n) }, key)(b)
}

// TestPrintB2 prints the B2 lines for `make bench` when AETHER_BENCH=1: a token's first check,
// and the same token again (an agent sends one token with every call until it expires).
func TestPrintB2(t *testing.T) {
	if os.Getenv("AETHER_BENCH") != "1" {
		t.Skip("set AETHER_BENCH=1 to run the B2 benchmark")
	}
	v, is, key := b2Setup(t)
	fresh := func(n int) []string { return b2Tokens(is, n) }
	again := same(is.Token("warm-up", testAud))
	for _, c := range []struct {
		name   string
		tokens func(int) []string
	}{{"B2", fresh}, {"B2-again", again}} {
		// Interleaved rounds, median of each: the machine is shared and noisy.
		var ours, base []float64
		for range 3 {
			o, b := testing.Benchmark(benchVerify(v, c.tokens)), testing.Benchmark(benchJWTParse(c.tokens, key))
			ours = append(ours, float64(o.T.Nanoseconds())/float64(o.N))
			base = append(base, float64(b.T.Nanoseconds())/float64(b.N))
		}
		slices.Sort(ours)
		slices.Sort(base)
		fmt.Printf("%s ours=%.0fns baseline=%.0fns ratio=%.2f\n", c.name, ours[1], base[1], ours[1]/base[1])
	}
}
