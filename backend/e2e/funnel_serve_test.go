package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFunnelServeHeadless: `aether node serve --funnel` prints the login link once on its
// terminal, then the published address; `aether status` shows it, `aether funnel use` makes it
// the publicUrl; Tailscale's state is in <data dir>/tailscale, mode 0700.
func TestFunnelServeHeadless(t *testing.T) {
	t.Parallel()
	tn := newTailnet(t, nil, true)
	bin := buildAether(t)
	root := t.TempDir()
	dataDir, pol := filepath.Join(root, "data"), filepath.Join(root, "policy.json")
	gw := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	if err := os.WriteFile(pol, []byte(fmt.Sprintf(`{"pact":{"publicUrl":"http://%s","audience":"http://%s","brands":[]}}`, gw, gw)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "node", "serve", "--funnel", "--policy", pol, "--data-dir", dataDir, "--port", "0", "--admin-port", "0", "--pact-listen", gw)
	cmd.Env = append(os.Environ(), "AETHER_FUNNEL_CONTROL_URL="+tn.url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var said []string
	wait := func(re *regexp.Regexp) []string {
		t.Helper()
		deadline := time.After(waitLimit)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("node serve ended; it said:\n%s\nstderr:\n%s", strings.Join(said, "\n"), stderr.String())
				}
				said = append(said, l)
				if m := re.FindStringSubmatch(l); m != nil {
					return m
				}
			case <-deadline:
				t.Fatalf("node serve never said %s; it said:\n%s", re, strings.Join(said, "\n"))
			}
		}
	}
	login := wait(regexp.MustCompile(`^Tailscale Funnel: sign in to your tailnet at (\S+/auth/\S+)$`))[1]
	if !tn.control.CompleteAuth(login) {
		t.Fatalf("the control server does not know %s", login)
	}
	wait(regexp.MustCompile(`^Tailscale Funnel: published at ` + regexp.QuoteMeta(funnelURL) + ` \(not the publicUrl yet\)$`))
	if n := strings.Count(strings.Join(said, "\n"), login); n != 1 {
		t.Errorf("the login link was printed %d times", n)
	}
	if strings.Contains(stderr.String(), "/auth/") {
		t.Errorf("the login link is in the log:\n%s", stderr.String())
	}
	if fi, err := os.Stat(filepath.Join(dataDir, "tailscale")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("<data dir>/tailscale: %v %v; want a folder of mode 0700", fi, err)
	}

	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
		defer cancel()
		b, err := exec.CommandContext(ctx, bin, append(args, "--data-dir", dataDir)...).CombinedOutput()
		if err != nil {
			t.Fatalf("aether %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	if st := run("status"); !strings.Contains(st, "reach     published at "+funnelURL) {
		t.Errorf("aether status:\n%s", st)
	}
	// The node asks its public address as an agent would (docs/deploy.md): this node has no
	// path to the test's tailnet name from outside, so once that check has answered the line
	// says so; before, it says the address is in use.
	used := run("funnel", "use")
	if !strings.Contains(used, "reachable at "+funnelURL) && !strings.Contains(used, "published at "+funnelURL+", but not reachable from the internet: ") {
		t.Errorf("aether funnel use: %s", used)
	}
	if data, _ := os.ReadFile(pol); !strings.Contains(string(data), `"publicUrl": "`+funnelURL+`"`) {
		t.Errorf("policy.json after aether funnel use:\n%s", data)
	}
}
