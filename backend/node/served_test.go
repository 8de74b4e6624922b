package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestOneServedPolicy: while the Brands page swaps the policy again and again, consent's brands
// are never another policy's than the gateway's. Reading consent, the gateway, then consent
// again, a gateway that differs from an unchanged consent view would be the moment the two
// disagree (a turn checked against one brand and run on another).
func TestOneServedPolicy(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(root, "policy.json")
	os.WriteFile(pol, []byte(fmt.Sprintf(`{"pact":{"publicUrl":"http://127.0.0.1:1","audience":"http://127.0.0.1:1","allowInsecureLocalIssuers":true,`+
		`"brands":[{"id":"review","name":"v0","description":"Reviews code in my workspace.","capability":"review","workspace":%q,"accessMode":"read_only","scope":{"id":"review:read_only","description":"Review"}}]}}`, ws)), 0o600)
	n, err := Start(context.Background(), Options{PolicyPath: pol, DataDir: filepath.Join(root, "data"), PactListen: "127.0.0.1:0",
		CodexPath: filepath.Join(root, "no-codex"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Stop(ctx)
	})
	consentView := func() string { return n.consentBrands()[0].Name }
	gatewayView := func() string { return n.gw.Load().Policy().Pact.Brands[0].Name }

	base := n.gw.Load().Policy()
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= 2000; i++ {
			p := base.Clone()
			p.Pact.Brands[0].Name = fmt.Sprintf("v%d", i)
			if err := n.servePolicy(p.Snapshot()); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for checks := 0; ; checks++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d checks", checks)
			return
		default:
		}
		c1 := consentView()
		g := gatewayView()
		c2 := consentView()
		if c1 == c2 && g != c1 {
			t.Fatalf("the gateway serves %s while consent sees %s", g, c1)
		}
	}
}
