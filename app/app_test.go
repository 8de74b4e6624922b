package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/owner"
)

func TestUserCodeFromArgs(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no args", nil, ""},
		{"consent link", []string{"https://127.0.0.1:3000/pact/consent?user_code=BCDF-GHJK"}, "BCDF-GHJK"},
		{"trailing slash", []string{"https://127.0.0.1:3000/pact/consent/?user_code=bcdfghjk"}, "bcdfghjk"},
		{"C10 extra query parameters are ignored", []string{"https://127.0.0.1:3000/pact/consent?user_code=BCDF-GHJK&agent=Bank&brand=evil"}, "BCDF-GHJK"},
		{"aether: link (the desktop entry's scheme)", []string{"aether://127.0.0.1:3000/pact/consent?user_code=BCDF-GHJK"}, "BCDF-GHJK"},
		{"aether: link without a host", []string{"aether:/pact/consent?user_code=BCDF-GHJK"}, "BCDF-GHJK"},
		{"other page", []string{"https://127.0.0.1:3000/sharing?user_code=BCDF-GHJK"}, ""},
		{"aether: other page", []string{"aether://127.0.0.1:3000/sharing?user_code=BCDF-GHJK"}, ""},
		{"other scheme", []string{"javascript:alert(1)//pact/consent?user_code=BCDF-GHJK"}, ""},
		{"script in the code", []string{`https://127.0.0.1:3000/pact/consent?user_code=</script><script>alert(1)`}, ""},
		{"too long", []string{"https://127.0.0.1:3000/pact/consent?user_code=" + strings.Repeat("B", 40)}, ""},
		{"second argument", []string{"--foo", "https://h/pact/consent?user_code=BCDF-GHJK"}, "BCDF-GHJK"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := userCodeFromArgs(c.args); got != c.want {
				t.Errorf("userCodeFromArgs(%q) = %q, want %q", c.args, got, c.want)
			}
		})
	}
}

func TestNavigateJS(t *testing.T) {
	js := navigateJS(consentPage("BCDF GHJK"))
	if want := `new CustomEvent("aether:navigate",{detail:"/pact/consent?user_code=BCDF+GHJK"})`; !strings.Contains(js, want) {
		t.Errorf("navigateJS = %s, want it to contain %s", js, want)
	}
	// The path is a JSON string: no way out of it, and no raw line separators.
	js = navigateJS("/x\"</script>\u2028")
	for _, bad := range []string{`"</`, "\u2028", `x"<`} {
		if strings.Contains(js, bad) {
			t.Errorf("navigateJS left %q in %s", bad, js)
		}
	}
}

func TestNotificationText(t *testing.T) {
	r := owner.ConsentRequest{
		ID: "df_1", UserCode: "BCDF-GHJK",
		Agent: owner.AgentOf("https://agent.example/id", "alice"),
		Brand: owner.BrandRef{ID: "review", Name: "Code review"}, Scope: owner.Scope{ID: "review:read_only", Description: "Review code (read only)"},
		ExpiresAt: time.Now().Add(10 * time.Minute),
	}
	summary, body := notificationText(r, true)
	if summary != "Allow an agent to use Code review?" {
		t.Errorf("summary = %q", summary)
	}
	for _, want := range []string{"Issuer: <b>agent.example</b>", "Agent says it is alice — issued by agent.example", "Host: agent.example",
		"Brand: Code review [review]", "Scope: Review code (read only) [review:read_only]", "Code: <b>BCDF-GHJK</b>"} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}

	t.Run("C13 long issuer host: the registrable domain first, in full", func(t *testing.T) {
		h := r
		h.Agent = owner.AgentOf("https://accounts.google.com.signin-verified-"+strings.Repeat("x", 40)+"."+strings.Repeat("y", 50)+".attacker-owned.example", "alice@google.com")
		_, body := notificationText(h, false)
		lines := strings.Split(body, "\n")
		if lines[0] != "Issuer: attacker-owned.example" || lines[1] != "Agent says it is alice@google.com — issued by attacker-owned.example" {
			t.Errorf("notification starts %q; want the site, then the subject as its claim", lines[:2])
		}
		if strings.Contains(body, "accounts.google.com") || !strings.Contains(body, "Host: ….") {
			t.Errorf("the host is not cut from the left:\n%s", body)
		}
		if label := requestLabel(h); !strings.HasPrefix(label, "Agent says it is alice@google.com — issued by attacker-owned.example → ") {
			t.Errorf("tray label %q", label)
		}
	})

	t.Run("C15 IDN issuer: Unicode with its punycode beside it", func(t *testing.T) {
		h := r
		h.Agent = owner.AgentOf("https://login.xn--pple-43d.com", "bob")
		_, body := notificationText(h, false)
		if !strings.Contains(body, "Issuer: \u0430pple.com (xn--pple-43d.com)") {
			t.Errorf("body:\n%s", body)
		}
	})

	t.Run("C9 agent names with markup, bidi overrides and 10 KB", func(t *testing.T) {
		h := r
		h.Agent = owner.AgentOf("https://b\u0430nk.example", "<a href='x'>bank</a>&\u202egnp.exe\x1b[31m"+strings.Repeat("x", 10<<10)) // Cyrillic а
		_, body := notificationText(h, true)
		for _, bad := range []string{"<a ", "\u202e", "\x1b", strings.Repeat("x", 100)} {
			if strings.Contains(body, bad) {
				t.Errorf("body keeps %q", bad)
			}
		}
		if !strings.Contains(body, "&lt;a href=&apos;x&apos;&gt;bank&lt;/a&gt;&amp;") {
			t.Errorf("markup not escaped:\n%s", body)
		}
		if !strings.Contains(body, "Issuer: <b>b\u0430nk.example (xn--bnk-") {
			t.Errorf("issuer host not in punycode beside its Unicode form:\n%s", body)
		}
		_, plain := notificationText(h, false)
		if strings.Contains(plain, "&lt;") || strings.Contains(plain, "<b>") {
			t.Errorf("plain body has markup:\n%s", plain)
		}
		if label := requestLabel(h); strings.Contains(label, "\u202e") || strings.Contains(label, strings.Repeat("x", 100)) || !strings.Contains(label, "… — issued by b\u0430nk.example (xn--bnk-") {
			t.Errorf("tray label %q", label)
		}
	})
}

func TestBurstText(t *testing.T) {
	t.Run("C18 one notification for a burst, and N more", func(t *testing.T) {
		reqs := make([]owner.ConsentRequest, 13)
		for i := range reqs {
			reqs[i] = owner.ConsentRequest{ID: "df", UserCode: "BCDF-GHJK", Agent: owner.AgentOf("https://id.evil.example", "victim@bank.example")}
		}
		summary, body := burstText(reqs, true)
		if summary != "13 agents from evil.example ask to use your brands" || !strings.Contains(body, "<b>and 12 more from evil.example</b>") {
			t.Errorf("summary %q body:\n%s", summary, body)
		}
	})
}

func TestTrayText(t *testing.T) {
	r := owner.ConsentRequest{UserCode: "BCDF-GHJK", Agent: owner.AgentOf("https://agent.example:8443", "alice"), Brand: owner.BrandRef{ID: "review", Name: "Code review"}}
	if got, want := requestLabel(r), "Agent says it is alice — issued by agent.example → Code review (BCDF-GHJK)"; got != want {
		t.Errorf("requestLabel = %q, want %q", got, want)
	}
	cases := []struct {
		st   trayState
		want string
	}{
		{trayState{running: true}, "Aether: no requests waiting"},
		{trayState{running: true, pending: []owner.ConsentRequest{r}}, "Aether: 1 request waiting for you"},
		{trayState{running: true, pending: []owner.ConsentRequest{r, r}}, "Aether: 2 requests waiting for you"},
		{trayState{running: true, paused: true}, "Aether: gateway paused"},
		{trayState{}, "Aether: the gateway is stopped (policy.json has errors)"},
	}
	for _, c := range cases {
		if got := trayTooltip(c.st); got != c.want {
			t.Errorf("trayTooltip(%+v) = %q, want %q", c.st, got, c.want)
		}
	}
}

func TestLoginItem(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	li, err := newLoginItem()
	if err != nil {
		t.Fatal(err)
	}
	li.exe = "/opt/My Apps/aether$1%"
	if li.path != filepath.Join(dir, "autostart", "aether.desktop") {
		t.Errorf("path = %s", li.path)
	}
	if li.enabled() {
		t.Fatal("enabled before set")
	}
	if err := li.set(true); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(li.path)
	if err != nil {
		t.Fatal(err)
	}
	if want := `Exec=env AETHER_START_HIDDEN=1 "/opt/My Apps/aether\\$1%%"` + "\n"; !strings.Contains(string(data), want) {
		t.Errorf("entry lacks %q:\n%s", want, data)
	}
	if !li.enabled() {
		t.Error("not enabled after set")
	}
	if err := li.set(false); err != nil {
		t.Fatal(err)
	}
	if li.enabled() {
		t.Error("still enabled after unset")
	}
	if err := li.set(false); err != nil {
		t.Errorf("unset twice: %v", err)
	}
	li.exe = "/tmp/a\nX-Evil=1"
	if err := li.set(true); err == nil {
		t.Error("a path with a newline was written into the desktop entry")
	}
}

func TestExecQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/bin/aether":     "/usr/bin/aether",
		"/opt/a b/aether":     `"/opt/a b/aether"`,
		`/opt/"q"/x`:          `"/opt/\\"q\\"/x"`,
		"/opt/`cmd`/x":        "\"/opt/\\\\`cmd\\\\`/x\"",
		`/opt/back\slash/x`:   `"/opt/back\\\\slash/x"`,
		"/opt/100%/aether":    "/opt/100%%/aether",
		"/opt/$HOME/x":        `"/opt/\\$HOME/x"`,
		"/opt/ünïcode/aether": `"/opt/ünïcode/aether"`,
	} {
		if got := execQuote(in); got != want {
			t.Errorf("execQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestBadge(t *testing.T) {
	icons := newTrayIcons()
	if len(icons.plain) == 0 || len(icons.badge) == 0 || string(icons.plain) == string(icons.badge) {
		t.Fatal("no distinct badge icon")
	}
	img, err := newNotificationImage(smallIcon)
	if err != nil {
		t.Fatal(err)
	}
	if img.Width != 64 || img.Height != 64 || int(img.Rowstride*img.Height) != len(img.Data) || img.Channels != 4 {
		t.Errorf("image-data %dx%d stride %d, %d bytes", img.Width, img.Height, img.Rowstride, len(img.Data))
	}
}
