package app

import (
	"fmt"
	"html"
	"os"
	"os/exec"
	"time"
)

// openSignedIn opens the admin UI, signed in, in the default browser. The sign-in link
// carries a one-time code (node.SignInURL mints one per call), and a command line is readable
// by every local user (ps) for as long as the browser runs, so the link goes into a page only
// this user can read, and the browser opens that page.
func openSignedIn(signInURL string) error {
	dir := os.Getenv("XDG_RUNTIME_DIR") // per-user, 0700
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "aether-sign-in-*.html")
	if err != nil {
		return fmt.Errorf("open in browser: %w", err)
	}
	link := html.EscapeString(signInURL)
	page := `<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">` +
		`<meta http-equiv="refresh" content="0;url=` + link + `"><title>Aether</title>` +
		`<p><a href="` + link + `">Open Aether</a></p>`
	_, werr := f.WriteString(page)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("open in browser: %w", werr)
	}
	cmd := exec.Command(browserCommand, "file://"+f.Name())
	if err := cmd.Start(); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("open in browser: %s: %w", browserCommand, err)
	}
	go cmd.Wait()
	// The browser reads the page at once; do not leave even a spent code lying around.
	time.AfterFunc(time.Minute, func() { os.Remove(f.Name()) })
	return nil
}
