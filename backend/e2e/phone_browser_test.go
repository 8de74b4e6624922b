package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	agentpkg "github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/node"
	ownerpkg "github.com/aether/aether/backend/owner"
)

// tailnetProxy is an HTTP CONNECT proxy on loopback that dials every tunnel over d's tailnet
// connection: Chromium, which cannot join a tsnet tailnet, reaches the node as the phone d.
func tailnetProxy(t *testing.T, d *tailnetDevice) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil || req.Method != http.MethodConnect {
					io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
					return
				}
				up, err := d.srv.Dial(t.Context(), "tcp", req.Host)
				if err != nil {
					io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
					return
				}
				defer up.Close()
				io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n")
				go io.Copy(up, br)
				io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestPhoneBrowser is the owner's phone in Chromium at 360 px, on the tailnet (through
// tailnetProxy): it pairs with the link of "Add a phone", sees the agent's pending request on
// the phone's consent page, gets the service worker's notification for it from a push that
// DevTools delivers (ServiceWorker.deliverPushMessage), and allows it once the button arms;
// the agent's turn runs. Screenshots: test-results/ui/phone-*.png. Tapping a notification is
// not something headless Chromium can do (it shows none on screen): the notification's data and
// actions are checked, and the page it opens is the one this test decides on.
func TestPhoneBrowser(t *testing.T) {
	t.Parallel()
	root := browserRoot(t)
	tn := newTailnet(t, nil, false)
	e := newEnv(t, withFunnel(tn), withNode(func(o *node.Options) { o.UI = os.DirFS(filepath.Join(root, "frontend", "dist")) }))
	waitReach(t, e, "published", func(r ownerpkg.Reachability) bool { return r.State == ownerpkg.ReachStatePublished })
	self := e.n.FunnelTailnet().Tailnet()
	st, err := self.Up(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	phone := joinTailnet(t, tn, "pixel", self)
	phone.seenAs(self, st.Self.UserID, false)
	proxy := tailnetProxy(t, phone)
	var pr struct{ Link string }
	if code := e.admin.do("POST", "/api/devices/pair", nil, &pr); code != http.StatusOK {
		t.Fatalf("add a phone: %d", code)
	}

	codes := make(chan string, 1)
	type result struct {
		res agentpkg.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := agentpkg.Run(t.Context(), agentpkg.Options{Card: e.publicURL, Brand: "review", Message: "from the phone's browser", Dir: t.TempDir(),
			OnUserCode: func(code, _ string) { codes <- code }, IdentityToken: e.issuer.Token("phone-agent", e.publicURL)})
		done <- result{res, err}
	}()
	var code string
	select {
	case code = <-codes:
	case r := <-done:
		t.Fatalf("the agent ended before asking: %+v %v", r.res, r.err)
	}

	cmd := exec.Command("node", filepath.Join(root, "frontend", "tests", "phone.mjs"),
		"--proxy", proxy, "--link", pr.Link, "--code", code, "--out", filepath.Join(root, uiShotsDir))
	cmd.Dir = filepath.Join(root, "frontend")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("phone.mjs: %v\n%s", err, stderr.String())
	}
	var saw struct {
		Width         int
		Notifications []struct {
			Title, Body, Tag string
			Data             map[string]string
			Actions          []string
		}
		Outcome  string
		Problems []string
	}
	if err := json.Unmarshal(out, &saw); err != nil {
		t.Fatalf("phone.mjs said %q: %v", out, err)
	}
	if len(saw.Problems) > 0 {
		t.Errorf("the phone's page had problems: %v", saw.Problems)
	}
	if len(saw.Notifications) != 1 {
		t.Fatalf("notifications %+v; want the request's one", saw.Notifications)
	}
	n := saw.Notifications[0]
	if !strings.Contains(n.Title, "review") && !strings.Contains(n.Title, "Review") || !strings.Contains(n.Body, code) ||
		n.Data["code"] != code || strings.Join(n.Actions, ",") != "allow,deny" {
		t.Errorf("the notification %+v; want the brand, the code %s and Allow/Deny actions", n, code)
	}
	r := <-done
	if r.err != nil || !r.res.Consented || r.res.Answer != codextest.DefaultAnswer {
		t.Fatalf("the agent after the phone allowed: %+v %v (page said %q)", r.res, r.err, saw.Outcome)
	}
	t.Logf("the phone saw %q; screenshots in %s", saw.Outcome, filepath.Join(root, uiShotsDir))
}
