package app

import (
	"fmt"
	"os"
	"strconv"
)

// config is what the desktop app takes from its environment: it has no flags (a
// launcher or a file manager starts it), so the few knobs `node serve` has as flags
// are environment variables here. Each is optional.
//
//	AETHER_DATA_DIR     data dir (default: the per-user data folder, as `node serve`)
//	AETHER_POLICY       policy.json (default: the last used one, else <data-dir>/policy.json)
//	AETHER_ADMIN_PORT   admin UI port on 127.0.0.1 (default 3000, as `node serve`)
//	AETHER_PACT_LISTEN  gateway address (default 127.0.0.1:8080, as `node serve`)
//	AETHER_CODEX        codex binary (default: the one named or got on the Status page, else codex on PATH)
//	AETHER_CODEX_REGISTRY  where Get Codex downloads from (default: npm's registry; tests use a stand-in)
//	AETHER_START_HIDDEN "1": start in the tray without showing the window (the login item sets it)
//	AETHER_FUNNEL_CONTROL_URL  the Tailscale control server for Funnel (default Tailscale's; the GUI test's own)
type config struct {
	dataDir    string
	policyPath string
	adminPort  int
	pactListen string
	codex      string
	registry   string
	hidden     bool
	controlURL string // Tailscale control server for Funnel; "" = Tailscale's
}

func configFromEnv() (config, error) {
	c := config{
		dataDir:    os.Getenv("AETHER_DATA_DIR"),
		policyPath: os.Getenv("AETHER_POLICY"),
		adminPort:  3000,
		pactListen: "127.0.0.1:8080",
		codex:      os.Getenv("AETHER_CODEX"),
		registry:   os.Getenv("AETHER_CODEX_REGISTRY"),
		hidden:     os.Getenv("AETHER_START_HIDDEN") == "1",
		controlURL: os.Getenv("AETHER_FUNNEL_CONTROL_URL"),
	}
	if v := os.Getenv("AETHER_ADMIN_PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 || p > 65535 {
			return c, fmt.Errorf("AETHER_ADMIN_PORT=%q is not a port number", v)
		}
		c.adminPort = p
	}
	if v := os.Getenv("AETHER_PACT_LISTEN"); v != "" {
		c.pactListen = v
	}
	return c, nil
}
