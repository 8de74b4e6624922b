package policy

import (
	"strings"
	"testing"
)

// TestPublicGateway: allowInsecureLocalIssuers never goes with a gateway anyone but this
// computer reaches (docs/threats.md N4): Funnel (pact.funnel or --funnel), a publicUrl or
// audience off loopback, a gateway listening off loopback. A loopback gateway keeps it, and a
// first run does not set it.
func TestPublicGateway(t *testing.T) {
	const local = `"publicUrl": "http://127.0.0.1:8080", "audience": "http://127.0.0.1:8080"`
	const flag = `, "allowInsecureLocalIssuers": true`
	refused := []struct {
		name, pact string
		lim        Limits
		why        string
	}{
		{"N4 pact.funnel on", local + flag + `, "funnel": true`, Limits{}, "while pact.funnel is on (the gateway is on the internet)"},
		{"N4 --funnel", local + flag, Limits{Funnel: true}, "while the node publishes the gateway on the internet with Tailscale Funnel (--funnel)"},
		{"N4 the Funnel address as publicUrl", `"publicUrl": "https://aether.tail-scale.ts.net", "audience": "https://aether.tail-scale.ts.net"` + flag, Limits{},
			`while the gateway is reached at "https://aether.tail-scale.ts.net", which is not on this computer`},
		{"N4 an https proxy on a LAN address", `"publicUrl": "https://192.168.1.5:8443", "audience": "https://192.168.1.5:8443"` + flag, Limits{},
			`while the gateway is reached at "https://192.168.1.5:8443", which is not on this computer`},
		{"N4 a public audience", `"publicUrl": "http://127.0.0.1:8080", "audience": "https://aether.example.com"` + flag, Limits{},
			`while the gateway is reached at "https://aether.example.com", which is not on this computer`},
		{"N4 a gateway on every address", local + flag, Limits{GatewayListen: "0.0.0.0:8080"}, "while the gateway listens on 0.0.0.0:8080, which other computers reach"},
		{"N4 a gateway on every address, no host", local + flag, Limits{GatewayListen: ":8080"}, "while the gateway listens on :8080, which other computers reach"},
		{"N4 a gateway on a LAN address", local + flag, Limits{GatewayListen: "192.168.1.5:8080"}, "while the gateway listens on 192.168.1.5:8080, which other computers reach"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.lim.Load(writePolicy(t, policyDir(t), `{"pact": {`+tc.pact+`, "brands": []}}`))
			wantProblems(t, err, Problem{"pact.allowInsecureLocalIssuers", "must not be set " + tc.why + ": it is for tests on this computer only, " +
				"and with it anyone who reaches the gateway can make this node fetch addresses on this computer (docs/threats.md N4). Remove it from policy.json"})
		})
	}

	allowed := []struct {
		name, pact string
		lim        Limits
	}{
		{"a loopback gateway keeps the flag", local + flag, Limits{GatewayListen: "127.0.0.1:8080", DataDir: t.TempDir()}},
		{"a TLS proxy on this computer", `"publicUrl": "https://localhost:8443", "audience": "https://[::1]:8443"` + flag, Limits{GatewayListen: "localhost:8080"}},
		{"Funnel without the flag", `"publicUrl": "https://aether.tail-scale.ts.net", "audience": "https://aether.tail-scale.ts.net", "funnel": true`, Limits{Funnel: true, GatewayListen: "0.0.0.0:8080"}},
		{"http on loopback without the flag", local, Limits{}},
	}
	for _, tc := range allowed {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.lim.Load(writePolicy(t, policyDir(t), `{"pact": {`+tc.pact+`, "brands": []}}`)); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("N4 the starter policy does not set the flag", func(t *testing.T) {
		p := Starter("127.0.0.1:8080")
		if p.Pact.AllowInsecureLocalIssuers {
			t.Fatalf("the starter policy sets allowInsecureLocalIssuers: %+v", p.Pact)
		}
		if err := Validate(p, policyDir(t)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("N4 turning Funnel on is refused while the flag is set", func(t *testing.T) {
		f, _ := openTestFile(t, `{"pact": {`+local+flag+`, "brands": []}}`)
		path := f.Path()
		before := string(readFile(t, path))
		_, err := f.Modify(func(p *Policy) error { p.Pact.Funnel = true; return nil })
		if err == nil || !strings.Contains(err.Error(), "pact.allowInsecureLocalIssuers: must not be set while pact.funnel is on") {
			t.Fatalf("Modify turned Funnel on with the flag set: %v", err)
		}
		if after := string(readFile(t, path)); after != before || f.Current().Policy.Pact.Funnel {
			t.Fatalf("the refused change was kept:\n%s", after)
		}
	})
}
