package identity

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aether/aether/backend/internal/fuzzseed"
)

// The fuzz targets of the identity JWT (docs/threats.md, J1–J30). README.md, "Fuzzing", says
// how to run them. The issuer's key is fixed and its keys are in the cache before the first
// input, so nothing is fetched: every other issuer fails at once, without the network.

const (
	fuzzIssuer = "https://issuer.example"
	fuzzKID    = "ed-1"
	fuzzAud    = "https://node.example"
)

var (
	fuzzNow  = time.Unix(1_800_000_000, 0)
	fuzzPriv = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
)

// noNetwork fails every fetch a fuzzed issuer would start.
type noNetwork struct{}

func (noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("fuzz: no network")
}

// fuzzVerifier verifies tokens of fuzzIssuer, whose key is cached and fresh at fuzzNow.
func fuzzVerifier(f *testing.F) *Verifier {
	v := New(Config{
		Audience: fuzzAud, NodeIssuer: fuzzAud, Now: func() time.Time { return fuzzNow },
		Logger: slog.New(slog.DiscardHandler),
		LookupIP: func(context.Context, string) ([]net.IP, error) {
			return nil, errors.New("fuzz: no network")
		},
	})
	for i := range v.clients {
		v.clients[i] = &http.Client{Transport: noNetwork{}}
	}
	jwks := fmt.Sprintf(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":%q,"kid":%q,"alg":"EdDSA","use":"sig"}]}`,
		b64(fuzzPriv.Public().(ed25519.PublicKey)), fuzzKID)
	ks, err := v.parseJWKS(context.Background(), []byte(jwks))
	if err != nil {
		f.Fatal(err)
	}
	is := &issuer{name: fuzzIssuer, scope: scopePublic}
	is.keys.Store(ks)
	v.issuers[fuzzIssuer] = is
	f.Cleanup(v.fetches.Wait)
	if _, err := v.Verify(context.Background(), fuzzSign([]byte(okHeader), claimsJSON(nil)), "192.0.2.10"); err != nil {
		f.Fatalf("the fixture refuses a valid token: %v", err)
	}
	return v
}

func fuzzSign(header, payload []byte) string {
	in := b64(header) + "." + b64(payload)
	return in + "." + b64(ed25519.Sign(fuzzPriv, []byte(in)))
}

func claimsJSON(mod func(map[string]any)) []byte {
	c := map[string]any{"iss": fuzzIssuer, "sub": "alice", "aud": fuzzAud,
		"iat": fuzzNow.Unix(), "exp": fuzzNow.Add(5 * time.Minute).Unix()}
	if mod != nil {
		mod(c)
	}
	b, _ := json.Marshal(c)
	return b
}

const okHeader = `{"alg":"EdDSA","typ":"JWT","kid":"ed-1"}`

// jwtSeeds are header and payload pairs: realistic tokens and the J rows' hostile shapes.
func jwtSeeds() []fuzzseed.Seed {
	s := func(name, h string, p []byte) fuzzseed.Seed { return fuzzseed.S(name, []byte(h), p) }
	ok := claimsJSON(nil)
	return []fuzzseed.Seed{
		s("valid", okHeader, ok),
		s("valid-aud-list-nbf", `{"alg":"EdDSA","kid":"ed-1"}`, claimsJSON(func(c map[string]any) {
			c["aud"], c["nbf"], c["jti"] = []string{"https://other.example", fuzzAud}, fuzzNow.Unix(), "j1"
		})),
		s("j1-alg-none", `{"alg":"none","kid":"ed-1"}`, ok),
		s("j2-hs256", `{"alg":"HS256","kid":"ed-1"}`, ok),
		s("j4-no-kid", `{"alg":"EdDSA"}`, ok),
		s("j6-kid-not-string", `{"alg":"EdDSA","kid":7}`, ok),
		s("j6-kid-long", `{"alg":"EdDSA","kid":"`+strings.Repeat("k", 300)+`"}`, ok),
		s("j7-jku-jwk", `{"alg":"EdDSA","kid":"ed-1","jku":"https://evil.example/jwks","jwk":{"kty":"OKP"}}`, ok),
		s("j8-http-issuer", okHeader, claimsJSON(func(c map[string]any) { c["iss"] = "http://issuer.example" })),
		s("j9-private-issuer", okHeader, claimsJSON(func(c map[string]any) { c["iss"] = "https://10.0.0.1" })),
		s("j19-other-issuer", okHeader, claimsJSON(func(c map[string]any) { c["iss"] = "https://other.example" })),
		s("j20-no-exp", okHeader, claimsJSON(func(c map[string]any) { delete(c, "exp") })),
		s("j21-ten-years", okHeader, claimsJSON(func(c map[string]any) { c["exp"] = fuzzNow.Add(87600 * time.Hour).Unix() })),
		s("j22-iat-future", okHeader, claimsJSON(func(c map[string]any) { c["iat"] = fuzzNow.Add(time.Hour).Unix() })),
		s("j23-wrong-aud", okHeader, claimsJSON(func(c map[string]any) { c["aud"] = "https://node.example/" })),
		s("j24-expired", okHeader, claimsJSON(func(c map[string]any) { c["exp"] = fuzzNow.Add(-time.Hour).Unix() })),
		s("j25-delegation-typ", `{"alg":"EdDSA","kid":"ed-1","typ":"application/pact-delegation+jwt"}`, ok),
		s("j25-node-issuer", okHeader, claimsJSON(func(c map[string]any) { c["iss"] = fuzzAud + "/" })),
		s("j28-sub-twice", okHeader, []byte(`{"iss":"`+fuzzIssuer+`","sub":"alice","sub":"mallory","aud":"`+fuzzAud+`","iat":1800000000,"exp":1800000300}`)),
		s("j28-sub-upper", okHeader, []byte(`{"iss":"`+fuzzIssuer+`","SUB":"mallory","aud":"`+fuzzAud+`","iat":1800000000,"exp":1800000300}`)),
		s("j28-sub-escaped", okHeader, []byte(`{"iss":"`+fuzzIssuer+`","sub":"alice","\u0073ub":"mallory","aud":"`+fuzzAud+`","iat":1800000000,"exp":1800000300}`)),
		s("j28-sub-long-s", okHeader, []byte(`{"iss":"`+fuzzIssuer+`","`+"\u017f"+`ub":"mallory","aud":"`+fuzzAud+`","iat":1800000000,"exp":1800000300}`)),
		s("j28-kid-kelvin", `{"alg":"EdDSA","`+"\u212a"+`id":"ed-1"}`, ok),
		s("j28-alg-twice", `{"alg":"none","alg":"EdDSA","kid":"ed-1"}`, ok),
		s("crit", `{"alg":"EdDSA","kid":"ed-1","crit":["exp"]}`, ok),
		s("huge-numbers", okHeader, []byte(`{"iss":"`+fuzzIssuer+`","sub":"alice","aud":"`+fuzzAud+`","iat":-1e400,"exp":1e400}`)),
		s("exp-string", okHeader, []byte(`{"iss":"`+fuzzIssuer+`","sub":"alice","aud":"`+fuzzAud+`","iat":1800000000,"exp":"1800000300"}`)),
		s("fractional-times", okHeader, []byte(`{"iss":"`+fuzzIssuer+`","sub":"alice","aud":"`+fuzzAud+`","iat":1799999999.999,"exp":1800000299.5}`)),
		s("deep-nesting", okHeader, []byte(`{"iss":"`+fuzzIssuer+`","x":`+strings.Repeat("[", 200)+strings.Repeat("]", 200)+`}`)),
		s("invalid-utf8-name", okHeader, []byte("{\"iss\":\""+fuzzIssuer+"\",\"\xff\":1,\"sub\":\"alice\"}")),
		s("nul-in-sub", okHeader, []byte(`{"iss":"`+fuzzIssuer+`","sub":"ali\u0000ce","aud":"`+fuzzAud+`","iat":1800000000,"exp":1800000300}`)),
		s("truncated", okHeader[:20], ok[:30]),
		s("not-an-object", `["alg","EdDSA"]`, []byte(`"sub"`)),
	}
}

// FuzzIdentityVerify signs whatever header and payload it is given with the issuer's key, so
// that every input reaches the claim rules: a token Verify accepts must pass those rules read on
// their own (jwtProblem), and carry the identity the payload names. A refusal is an *Error.
func FuzzIdentityVerify(f *testing.F) {
	fuzzseed.Write(f, jwtSeeds())
	v := fuzzVerifier(f)
	f.Fuzz(func(t *testing.T, header, payload []byte) {
		tok := fuzzSign(header, payload)
		id, err := v.Verify(context.Background(), tok, "192.0.2.10")
		checkVerdict(t, tok, id, err)
	})
}

// checkVerdict: a refusal is an *Error; an accepted token is one the issuer's key signed, that
// passes the J rules read on their own, and whose identity is its iss, sub and exp.
func checkVerdict(t *testing.T, tok string, id Identity, err error) {
	t.Helper()
	if err != nil {
		if _, ok := errors.AsType[*Error](err); !ok {
			t.Fatalf("refusal is not an *Error: %T %v", err, err)
		}
		return
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("accepted %q: not three segments", tok)
	}
	sig, err1 := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err1 != nil || !ed25519.Verify(fuzzPriv.Public().(ed25519.PublicKey), []byte(parts[0]+"."+parts[1]), sig) {
		t.Fatalf("accepted %q: not signed by the issuer's key", tok)
	}
	header, _ := base64.RawURLEncoding.Strict().DecodeString(parts[0])
	payload, _ := base64.RawURLEncoding.Strict().DecodeString(parts[1])
	c, problem := jwtProblem(header, payload)
	if problem != "" {
		t.Fatalf("accepted a token the rules refuse (%s): header %q payload %q", problem, header, payload)
	}
	if id.Issuer != c.iss || id.Subject != c.sub || id.ExpiresAt.Unix() != int64(math.Trunc(c.exp)) {
		t.Fatalf("identity %+v, want iss %q sub %q exp %v", id, c.iss, c.sub, c.exp)
	}
}

type refClaims struct {
	iss, sub string
	exp      float64
}

// jwtProblem reads a token's header and payload by the J rules: "" and the claims when the
// node may accept it.
func jwtProblem(header, payload []byte) (refClaims, string) {
	var c refClaims
	h, problem := members(header, headerNames)
	if problem != "" {
		return c, "header: " + problem
	}
	p, problem := members(payload, claimNames)
	if problem != "" {
		return c, "payload: " + problem
	}
	str := func(m map[string]json.RawMessage, k string) (string, bool) {
		var s string
		raw, ok := m[k]
		return s, ok && json.Unmarshal(raw, &s) == nil
	}
	num := func(k string) (float64, bool) {
		raw, ok := p[k]
		if !ok {
			return 0, false
		}
		var s string
		if json.Unmarshal(raw, &s) == nil { // golang-jwt reads a numeric string as its number
			raw = json.RawMessage(s)
		}
		n, err := strconv.ParseFloat(string(raw), 64)
		return n, err == nil && !math.IsInf(n, 0)
	}
	if alg, _ := str(h, "alg"); alg != "EdDSA" {
		return c, "J1/J2 alg " + alg
	}
	if _, ok := h["crit"]; ok {
		return c, "crit"
	}
	if raw, ok := h["typ"]; ok {
		typ, isStr := str(h, "typ")
		if !isStr || strings.EqualFold(strings.TrimPrefix(strings.ToLower(typ), "application/"), DefaultDelegationType) {
			return c, "J25 typ " + string(raw)
		}
	}
	if _, ok := h["kid"]; ok {
		if kid, _ := str(h, "kid"); kid != fuzzKID {
			return c, "J6 kid"
		}
	}
	var ok bool
	if c.iss, ok = str(p, "iss"); !ok || c.iss != fuzzIssuer {
		return c, "J19 iss " + c.iss
	}
	if c.sub, ok = str(p, "sub"); !ok || c.sub == "" || len(c.sub) > maxSubjectBytes {
		return c, "sub"
	}
	now, leeway := float64(fuzzNow.Unix()), 60.0
	if c.exp, ok = num("exp"); !ok || c.exp+leeway <= now {
		return c, "J20/J24 exp"
	}
	iat, ok := num("iat")
	if !ok || iat > now+leeway {
		return c, "J22 iat"
	}
	if raw, present := p["nbf"]; present && string(raw) != "null" {
		if nbf, ok := num("nbf"); !ok || nbf > now+leeway {
			return c, "J22 nbf"
		}
	}
	if c.exp-iat > 3600 {
		return c, "J21 lifetime"
	}
	var auds []string
	if aud, isStr := str(p, "aud"); isStr {
		auds = []string{aud}
	} else if json.Unmarshal(p["aud"], &auds) != nil {
		return c, "J23 aud"
	}
	for _, a := range auds {
		if a == fuzzAud {
			return c, ""
		}
	}
	return c, "J23 aud"
}

// members reads the top-level members of a JSON object: "" when it is one, with at most
// maxMembers members whose names are valid UTF-8, no two equal under case folding, none a case
// variant of a registered name (J28).
func members(doc []byte, registered []string) (map[string]json.RawMessage, string) {
	if !json.Valid(doc) {
		return nil, "not JSON"
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return nil, "not an object"
	}
	out := map[string]json.RawMessage{}
	var names []string
	for dec.More() {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, "not JSON"
		}
		name := tok.(string)
		if raw := doc[before:dec.InputOffset()]; !utf8.Valid(raw) {
			return nil, "name not UTF-8"
		}
		for _, n := range names {
			if strings.EqualFold(n, name) {
				return nil, "J28 repeated name " + strconv.Quote(name)
			}
		}
		for _, r := range registered {
			if name != r && strings.EqualFold(name, r) {
				return nil, "J28 case variant " + strconv.Quote(name)
			}
		}
		names = append(names, name)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, "not JSON"
		}
		out[name] = val
	}
	if len(names) > maxMembers {
		return nil, "too many members"
	}
	return out, ""
}

var compactJWS = regexp.MustCompile(`^[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*$`)

// FuzzIdentityPrepass fuzzes the raw bearer token: prepass refuses exactly what the J26–J28
// rules refuse (for segments that are JSON; other JSON is golang-jwt's to refuse), and Verify
// never accepts a token the issuer's key did not sign or the rules refuse.
func FuzzIdentityPrepass(f *testing.F) {
	var seeds []fuzzseed.Seed
	for _, s := range jwtSeeds() {
		seeds = append(seeds, fuzzseed.S(s.Name, fuzzSign(s.Values[0].([]byte), s.Values[1].([]byte))))
	}
	valid := fuzzSign([]byte(okHeader), claimsJSON(nil))
	seeds = append(seeds,
		fuzzseed.S("j26-dots", strings.Repeat(".", 9000)),
		fuzzseed.S("j27-padding", strings.Replace(valid, ".", "=.", 1)),
		fuzzseed.S("j27-whitespace", strings.Replace(valid, ".", " .", 1)),
		fuzzseed.S("j27-std-alphabet", strings.ReplaceAll(strings.ReplaceAll(valid, "-", "+"), "_", "/")),
		fuzzseed.S("j27-non-canonical-bits", valid[:len(valid)-1]+"B"),
		fuzzseed.S("four-segments", valid+".x"),
		fuzzseed.S("empty-segments", ".."),
	)
	fuzzseed.Write(f, seeds)
	v := fuzzVerifier(f)
	f.Fuzz(func(t *testing.T, raw string) {
		perr := prepass(raw)
		ok := compactJWS.MatchString(raw)
		var segs [2][]byte
		if ok {
			parts := strings.Split(raw, ".")
			for i := range segs {
				var err error
				if segs[i], err = base64.RawURLEncoding.Strict().DecodeString(parts[i]); err != nil {
					ok = false
				}
			}
		}
		if perr == nil && !ok {
			t.Fatalf("prepass passed %q: not three strict base64url segments (J27)", raw)
		}
		if ok {
			both := true
			for i, reg := range [2][]string{headerNames, claimNames} {
				if !json.Valid(segs[i]) {
					both = false
					continue
				}
				_, problem := members(segs[i], reg)
				if perr == nil && problem != "" {
					t.Fatalf("prepass passed segment %q: %s", segs[i], problem)
				}
				if problem != "" {
					both = false
				}
			}
			if both && perr != nil {
				t.Fatalf("prepass refused %q (%v); the rules accept its header and payload", raw, perr)
			}
		}
		id, err := v.Verify(context.Background(), raw, "192.0.2.10")
		checkVerdict(t, raw, id, err)
	})
}
