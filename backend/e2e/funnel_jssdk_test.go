package e2e

import (
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	ownerpkg "github.com/aether/aether/backend/owner"
)

// TestFunnelJSSDK: the official A2A JavaScript SDK walks the whole delegated turn (card,
// AUTH_REQUIRED, device flow, turn, streaming, receipt checked with the JWKS) at
// https://aether.tail-scale.ts.net, through the loopback Funnel ingress. Node resolves the
// ts.net name to a forwarder on 127.0.0.1:443 (testdata/tsdns.cjs, preloaded), which passes
// each connection through the ingress; Node trusts the test CA and nothing else new.
func TestFunnelJSSDK(t *testing.T) {
	t.Parallel()
	root := jsSDKRoot(t)
	tn := newTailnet(t, nil, false)
	e := newEnv(t, withFunnel(tn))
	waitReach(t, e, "published", func(r ownerpkg.Reachability) bool { return r.State == ownerpkg.ReachStatePublished })
	in := newIngress(t, tn, e.n.FunnelTailnet().Tailnet())
	if st := e.admin.do("POST", "/api/reachability/use", nil, nil); st != http.StatusOK {
		t.Fatalf("use the Funnel URL: %d", st)
	}
	e.publicURL = funnelURL
	ln, err := net.Listen("tcp", "127.0.0.1:443")
	if err != nil {
		t.Skipf("the forwarder needs 127.0.0.1:443: %v", err)
	}
	defer ln.Close()
	go forwardThrough(in, ln)

	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tn.ca.root.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	preload, err := filepath.Abs(filepath.Join("testdata", "tsdns.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	nodeEnv := []string{"NODE_EXTRA_CA_CERTS=" + ca, "NODE_OPTIONS=--require " + preload, "AETHER_TS_HOSTS=aether." + tailnetDomain}
	for _, b := range bothBindings {
		t.Run(string(b), func(t *testing.T) {
			steps := runPactTurn(t, e, root, b, "js-funnel-"+string(b[0]), nodeEnv...)
			for _, name := range jsSteps[b] {
				if s, ok := steps[name]; !ok || s.Status != "pass" {
					t.Errorf("step %s through the Funnel: %+v", name, s)
				}
			}
		})
	}
}

// forwardThrough passes each connection accepted on ln to the node through the ingress.
func forwardThrough(in *ingress, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := in.dial(in.t.Context(), "tcp", "aether."+tailnetDomain+":443")
			if err != nil {
				return
			}
			defer up.Close()
			go io.Copy(up, c)
			io.Copy(c, up)
		}()
	}
}
