package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aether/aether/backend/cli"
	"github.com/aether/aether/backend/identity/identitytest"
)

// What the owner reads about an agent, and what the owner can do about a flood (docs/threats.md
// C13–C20), on a real node.

// attackIssuer is the consent-phishing issuer: a host that starts like Google's sign-in
// and ends in the attacker's own registrable domain, too long to read to its end.
var attackIssuer = "https://accounts.google.com.signin-verified-" + strings.Repeat("x", 40) + "." + strings.Repeat("y", 50) + "." + strings.Repeat("z", 50) + ".attacker-owned.example"

// localhostIssuer is a second test issuer whose host (and so registrable domain) is
// "localhost", where e.issuer's is "127.0.0.1": two issuers a test can tell apart.
func localhostIssuer(t *testing.T) *identitytest.Issuer {
	is := identitytest.NewIssuer(t)
	is.URL = strings.Replace(is.URL, "127.0.0.1", "localhost", 1)
	return is
}

// deviceAuth posts a device authorization request for the review brand with an identity JWT.
func deviceAuth(t *testing.T, e *env, token string) (int, map[string]any) {
	t.Helper()
	resp, out := formCall(t, http.DefaultClient, e.publicURL+"/pact/device_authorization", token, url.Values{"scope": {"review:read_only"}}, nil)
	if resp == nil {
		t.FailNow()
	}
	return resp.StatusCode, out
}

// setIssuer rewrites the issuer of a stored device flow: the node cannot reach a public issuer
// from a test, so the attack issuer is put where the consent service reads it, as a verified
// identity from it would have been stored.
func setIssuer(t *testing.T, e *env, userCode, iss string) {
	t.Helper()
	res, err := pactSQLite(t, e.dataDir).Exec(`UPDATE device_flows SET agent_iss = ? WHERE user_code = ? AND status = 'pending'`, iss, strings.ReplaceAll(userCode, "-", ""))
	if err != nil {
		t.Fatalf("set issuer of %s: %v", userCode, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("set issuer of %s: %d rows", userCode, n)
	}
}

func TestIssuerHostLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host254 := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 54) + ".example"
	for name, iss := range map[string]string{
		"C14 issuer host of 254 characters":                "https://" + host254,
		"C14 issuer host of 17 labels":                     "https://" + strings.Repeat("a.", 16) + "example",
		"C14 issuer host of 254 characters with a path":    "https://" + host254 + "/tenant",
		"C14 issuer host of 17 labels, loopback-like name": "http://" + strings.Repeat("a.", 16) + "localhost",
	} {
		t.Run(name, func(t *testing.T) {
			claims := e.issuer.Claims("alice@google.com", e.publicURL)
			claims["iss"] = iss
			code, out := deviceAuth(t, e, e.issuer.Sign(claims))
			desc, _ := out["error_description"].(string)
			if code != http.StatusUnauthorized || !strings.Contains(desc, "issuer host is too long: at most 253 characters and 16 labels") {
				t.Fatalf("device authorization: %d %v; want 401 saying the issuer host is too long", code, out)
			}
		})
	}
	t.Run("C14 a legitimate issuer is unaffected", func(t *testing.T) {
		if code, out := deviceAuth(t, e, e.issuer.Token("bob", e.publicURL)); code != http.StatusOK {
			t.Fatalf("device authorization: %d %v", code, out)
		}
	})
}

// TestDenyIssuer: one issuer floods the owner with requests; "Deny all from this issuer" ends
// them in one call, and another issuer's request stays pending.
func TestDenyIssuer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other := localhostIssuer(t)
	t.Run("C19 deny all from the flooding issuer, the other issuer's request stays", func(t *testing.T) {
		var flood []string
		for i := range 12 {
			code, out := deviceAuth(t, e, e.issuer.Token("flood-"+string(rune('a'+i)), e.publicURL))
			if code != http.StatusOK {
				break // a cap on the issuer's pending requests: what got in is the flood
			}
			flood = append(flood, out["user_code"].(string))
		}
		if len(flood) < 2 {
			t.Fatalf("only %d flood requests got in", len(flood))
		}
		code, out := deviceAuth(t, e, other.Token("carol", e.publicURL))
		if code != http.StatusOK {
			t.Fatalf("the other issuer's request: %d %v", code, out)
		}
		carol, carolDevice := out["user_code"].(string), out["device_code"].(string)
		var res struct {
			Site   string
			Denied int
		}
		if st := e.admin.do("POST", "/api/consent/deny-issuer", map[string]string{"site": "127.0.0.1"}, &res); st != 200 || res.Denied != len(flood) || res.Site != "127.0.0.1" {
			t.Fatalf("deny-issuer: %d %+v; want %d denied", st, res, len(flood))
		}
		for _, c := range flood {
			if stillPending(t, e, c) {
				t.Errorf("flood request %s still pending", c)
			}
		}
		if !stillPending(t, e, carol) {
			t.Fatal("the other issuer's request was denied too")
		}
		// A second Deny all finds nothing left; a site that is not a registrable domain is refused.
		if st := e.admin.do("POST", "/api/consent/deny-issuer", map[string]string{"site": "127.0.0.1"}, &res); st != 200 || res.Denied != 0 {
			t.Errorf("second deny-issuer: %d %+v", st, res)
		}
		if st := e.admin.do("POST", "/api/consent/deny-issuer", map[string]string{"site": "a.b.example.com"}, nil); st != 400 {
			t.Errorf("deny-issuer of a host that is not a site: %d, want 400", st)
		}
		// The other issuer's agent is still served: its poll waits for the owner.
		req, _ := http.NewRequest("POST", e.publicURL+"/pact/token", strings.NewReader(url.Values{
			"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {carolDevice}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+other.Token("carol", e.publicURL))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var poll map[string]any
		json.NewDecoder(resp.Body).Decode(&poll)
		resp.Body.Close()
		if poll["error"] != "authorization_pending" {
			t.Errorf("the other issuer's poll: %d %v; want authorization_pending", resp.StatusCode, poll)
		}
	})
}

// TestBrowserOwnerText: what the owner reads, and when the buttons take clicks, in Chromium.
func TestBrowserOwnerText(t *testing.T) {
	root := browserRoot(t)
	t.Parallel()
	e := newUIEnv(t, root)
	o := startOwner(t, e, root)
	browse[map[string]any](t, o, "signin", map[string]any{"link": e.n.SignInURL()})

	t.Run("C13 long issuer host on the consent and sharing pages", func(t *testing.T) {
		userCode, _, link := startFlow(t, e, e.agent("alice@google.com"))
		setIssuer(t, e, userCode, attackIssuer)
		got := browse[struct {
			Consent                          struct{ Site, Claim, Host, Group string }
			Sharing                          struct{ Site, Claim string }
			ConsentOverflow, SharingOverflow bool
		}](t, o, "issuerText", map[string]any{"link": link, "userCode": userCode, "shot": "consent-long-issuer.png", "sharingShot": "sharing-long-issuer.png"})
		const claim = "says it is alice@google.com — issued by attacker-owned.example"
		if got.Consent.Site != "attacker-owned.example" || got.Consent.Group != "attacker-owned.example" || got.Consent.Claim != claim {
			t.Errorf("consent page: site %q group %q claim %q; want the registrable domain in full and %q", got.Consent.Site, got.Consent.Group, got.Consent.Claim, claim)
		}
		if !strings.HasPrefix(got.Consent.Host, "https://….") || !strings.HasSuffix(got.Consent.Host, ".attacker-owned.example") || strings.Contains(got.Consent.Host, "google") {
			t.Errorf("consent page: host %q; want it cut from the left, ending in the site", got.Consent.Host)
		}
		if got.Sharing.Site != "attacker-owned.example" || got.Sharing.Claim != claim {
			t.Errorf("sharing page: site %q claim %q", got.Sharing.Site, got.Sharing.Claim)
		}
		if got.ConsentOverflow || got.SharingOverflow {
			t.Error("the long issuer makes a page scroll sideways")
		}
		// `aether grants list` says the same.
		var out, errOut bytes.Buffer
		if code := cli.Main([]string{"grants", "list", "--data-dir", e.dataDir}, cli.Env{Stdout: &out, Stderr: &errOut}); code != 0 {
			t.Fatalf("aether grants list: %d %s", code, errOut.String())
		}
		if !strings.Contains(out.String(), "agent "+claim+" (host ….") || strings.Contains(out.String(), "accounts.google.com") {
			t.Errorf("aether grants list:\n%s", out.String())
		}
	})

	t.Run("C16 a click within a second of a raise does nothing", func(t *testing.T) {
		userCode, _, link := startFlow(t, e, e.agent("dave"))
		got := browse[struct {
			Early             []struct{ Event, Armed string }
			PostsEarly, Posts int
			StillPending      bool
			Title             string
		}](t, o, "armedClick", map[string]any{"link": link, "userCode": userCode, "shot": "consent-arming.png"})
		for _, ev := range got.Early {
			if ev.Armed != "false" {
				t.Errorf("after %s the Allow button shows armed=%q; want it unarmed", ev.Event, ev.Armed)
			}
		}
		if len(got.Early) != 3 || got.PostsEarly != 0 || !got.StillPending {
			t.Fatalf("early clicks: %+v, %d decisions sent, pending %v; want none sent", got.Early, got.PostsEarly, got.StillPending)
		}
		if got.Posts != 1 || got.Title != "Allowed for 30 days" {
			t.Errorf("the click once armed: %d decisions, outcome %q", got.Posts, got.Title)
		}
		if g := grantsOf(t, e, "dave"); len(g) != 1 {
			t.Errorf("dave has %d grants, want 1", len(g))
		}
	})

	t.Run("C19 requests grouped by issuer, Deny all from this issuer", func(t *testing.T) {
		other := localhostIssuer(t)
		var flood []string
		for _, sub := range []string{"mallory-1", "mallory-2", "mallory-3"} {
			c, _, _ := startFlow(t, e, e.agent(sub))
			flood = append(flood, c)
		}
		code, out := deviceAuth(t, e, other.Token("erin", e.publicURL))
		if code != http.StatusOK {
			t.Fatalf("the other issuer's request: %d %v", code, out)
		}
		erin := out["user_code"].(string)
		got := browse[struct {
			Groups []struct {
				Site, Name string
				Codes      []string
				DenyAll    bool
			}
		}](t, o, "groups", nil)
		bySite := map[string][]string{}
		for _, g := range got.Groups {
			bySite[g.Site] = g.Codes
			if g.Site == "127.0.0.1" && (!g.DenyAll || g.Name != "127.0.0.1") {
				t.Errorf("the flooding issuer's group %+v: want its name and Deny all", g)
			}
		}
		if strings.Join(bySite["127.0.0.1"], ",") != strings.Join(flood, ",") || strings.Join(bySite["localhost"], ",") != erin {
			t.Fatalf("groups %+v; want %v from 127.0.0.1 and %s from localhost", got.Groups, flood, erin)
		}
		denied := browse[struct {
			Dialog string
			Titles []string
		}](t, o, "denyAll", map[string]any{"site": "127.0.0.1", "shot": "consent-deny-all.png"})
		if denied.Dialog != "Deny all 3 requests from 127.0.0.1?" || len(denied.Titles) != 3 {
			t.Errorf("Deny all: dialog %q, outcomes %q", denied.Dialog, denied.Titles)
		}
		for _, c := range flood {
			if stillPending(t, e, c) {
				t.Errorf("%s still pending after Deny all", c)
			}
		}
		if !stillPending(t, e, erin) {
			t.Error("the other issuer's request was denied too")
		}
		denyLeftover(t, e, erin)
	})
	noBrowserProblems(t, o)
}
