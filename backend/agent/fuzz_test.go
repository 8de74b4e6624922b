package agent

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/cardjson"
	"github.com/aether/aether/backend/internal/fuzzseed"
)

func cardSeeds() []fuzzseed.Seed {
	const pub = "https://aether.example.com"
	cardURL := pub + "/a2a/review/.well-known/agent-card.json"
	marshal := func(c *a2a.AgentCard) string {
		b, err := json.Marshal(c)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	good := marshal(pactCard(pub, "review", "review:read_only"))
	other := pactCard("https://other.example", "x", "s:1")
	for _, in := range other.SupportedInterfaces {
		in.URL = "https://api.other.example/rpc"
	}
	other.Skills[0].SecurityRequirements = nil
	edit := func(old, new string) string {
		if !strings.Contains(good, old) {
			panic("cardSeeds: " + old)
		}
		return strings.Replace(good, old, new, 1)
	}
	s := fuzzseed.S
	return []fuzzseed.Seed{
		s("valid-pact-card", []byte(good), cardURL),
		s("valid-root-card-behind-proxy", []byte(good), "http://127.0.0.1:8080/.well-known/agent-card.json"),
		s("valid-other-node", []byte(marshal(other)), "https://other.example/a2a/review/.well-known/agent-card.json"),
		s("valid-escaped-brand", []byte(edit(pub+"/a2a/review", pub+"/base/a2a/re%20view")), cardURL),
		s("no-interfaces", []byte(`{"name":"x","supportedInterfaces":[]}`), cardURL),
		s("null-interface", []byte(`{"name":"x","supportedInterfaces":[null,{"url":""}]}`), cardURL),
		s("relative-interface", []byte(`{"name":"x","supportedInterfaces":[{"url":"/a2a/x","protocolBinding":"JSONRPC"}]}`), cardURL),
		s("scheme-relative-interface", []byte(`{"name":"x","supportedInterfaces":[{"url":"//evil.example/a2a/x","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`), cardURL),
		s("scheme-relative-other-interface", []byte(`{"name":"x","supportedInterfaces":[{"url":"//evil.example/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`), cardURL),
		s("duplicate-key", []byte(edit(`"name":"Code review"`, `"name":"Code review","name":"Other"`)), cardURL),
		s("case-variant-key", []byte(edit(`"supportedInterfaces"`, `"supportedinterfaces":[{"url":"https://evil.example/a2a/x"}],"supportedInterfaces"`)), cardURL),
		s("long-s-key", []byte(edit(`"supportedInterfaces"`, `"`+"\u017f"+`upportedInterfaces":[{"url":"https://evil.example/a2a/x"}],"supportedInterfaces"`)), cardURL),
		s("huge-number", []byte(edit(`"streaming":true`, `"streaming":true,"x":1e400`)), cardURL),
		s("deep-nesting", []byte(`{"x":`+strings.Repeat("[", 200)+strings.Repeat("]", 200)+`}`), cardURL),
		s("invalid-utf8", []byte(edit(`"Code review"`, "\"Code \xff review\"")), cardURL),
		s("nul", []byte(edit(`"Code review"`, `"Code \u0000 review"`)), cardURL+"\x00"),
		s("truncated", []byte(good[:len(good)/2]), cardURL),
		s("not-json", []byte(`<html>`), cardURL),
		s("card-url-garbage", []byte(good), "::not a url"),
	}
}

// FuzzAgentCard checks ParseCard on any document from any card URL (docs/wire.md, "Agent
// cards"): it gives a card or an error, never both; a card has interfaces that all have a URL,
// and a publicUrl that is an absolute URL on the origin of one of them, since credentials go
// to that origin only; and the card a2a-go writes back out parses to the same brand, publicUrl,
// scope and device-flow endpoints. README.md, "Fuzzing", says how to run it.
func FuzzAgentCard(f *testing.F) {
	fuzzseed.Write(f, cardSeeds())
	f.Fuzz(func(t *testing.T, data []byte, cardURL string) {
		card, err := ParseCard(data, cardURL)
		if (card == nil) == (err == nil) {
			t.Fatalf("ParseCard returned card %v and error %v", card != nil, err)
		}
		if err != nil {
			return
		}
		if len(card.SupportedInterfaces) == 0 {
			t.Fatal("a card without interfaces")
		}
		origins := map[string]bool{}
		for _, in := range card.SupportedInterfaces {
			if in == nil || in.URL == "" {
				t.Fatalf("interface %+v without a URL", in)
			}
			if u, err := url.Parse(in.URL); err == nil {
				origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
			}
		}
		pub, err := url.Parse(card.PublicURL)
		if err != nil || pub.Scheme == "" || pub.Host == "" {
			t.Fatalf("publicUrl %q is not an absolute URL (%v)", card.PublicURL, err)
		}
		if !origins[strings.ToLower(pub.Scheme+"://"+pub.Host)] {
			t.Fatalf("publicUrl %q is on no interface's origin", card.PublicURL)
		}
		for _, b := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
			if in, err := card.Interface(b); err == nil && !strings.EqualFold(string(in.ProtocolBinding), string(b)) {
				t.Fatalf("Interface(%s) gave a %s interface", b, in.ProtocolBinding)
			}
		}
		again, err := cardjson.Marshal(card.AgentCard)
		if err != nil {
			return // a2a-go cannot write every card it reads (e.g. an unknown scheme type)
		}
		card2, err := ParseCard(again, cardURL)
		if err != nil {
			t.Fatalf("the card written back does not parse: %v\n%s", err, again)
		}
		if card2.Brand != card.Brand || card2.PublicURL != card.PublicURL || card2.Scope != card.Scope ||
			card2.DeviceAuthorizationURL != card.DeviceAuthorizationURL || card2.TokenURL != card.TokenURL {
			t.Fatalf("written back, the card reads differently:\nbefore %q %q %q %q %q\nafter  %q %q %q %q %q",
				card.Brand, card.PublicURL, card.Scope, card.DeviceAuthorizationURL, card.TokenURL,
				card2.Brand, card2.PublicURL, card2.Scope, card2.DeviceAuthorizationURL, card2.TokenURL)
		}
	})
}
