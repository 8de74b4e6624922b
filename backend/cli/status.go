package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aether/aether/backend/datadir"
	"github.com/aether/aether/backend/owner"
)

// nodeClient talks to a running node's API with the admin token from the data dir.
type nodeClient struct {
	base  string
	token string
	http  *http.Client
}

func newNodeClient(dir string) (*nodeClient, error) {
	d, err := dataDir(dir)
	if err != nil {
		return nil, err
	}
	addr, tok, err := datadir.LocalAPI(d)
	if err != nil {
		return nil, err
	}
	return &nodeClient{base: "http://" + addr, token: tok, http: &http.Client{Timeout: 15 * time.Second}}, nil
}

func (c *nodeClient) do(method, path string, out any) error { return c.send(method, path, nil, out) }

// post sends in (when not nil) as the JSON body.
func (c *nodeClient) post(path string, in, out any) error { return c.send("POST", path, in, out) }

func (c *nodeClient) send(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("the node at %s does not answer (is it running?): %w", c.base, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.Unmarshal(answer, &e)
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, e.Error)
	}
	return json.Unmarshal(answer, out)
}

func status(args []string, env Env) int {
	fs := newFlags("status", env)
	dir := fs.String("data-dir", "", "the node's data dir")
	asJSON := fs.Bool("json", false, "print the raw JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := newNodeClient(*dir)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether status:", err)
		return 1
	}
	var st struct {
		Gateway struct {
			Listen, PublicURL string
			Paused, Running   bool
		}
		Admin  struct{ URL string }
		Brands []struct{ ID, Name, AccessMode, CardURL string }
		Codex  struct {
			Found, VersionOK, LoggedIn bool
			Path, Version, Error       string
			Credential                 struct{ Summary string }
		}
		Confinement  struct{ Text string }
		Reachability owner.Reachability
		Pending      int
		Policy       struct {
			Path  string
			Error *struct{ Message string }
		}
	}
	var raw json.RawMessage
	if err := c.do("GET", "/v1/status", &raw); err != nil {
		fmt.Fprintln(env.Stderr, "aether status:", err)
		return 1
	}
	if *asJSON {
		fmt.Fprintln(env.Stdout, string(raw))
		return 0
	}
	json.Unmarshal(raw, &st)
	state := "serving"
	switch {
	case !st.Gateway.Running:
		state = "stopped"
	case st.Gateway.Paused:
		state = "paused"
	}
	fmt.Fprintf(env.Stdout, "gateway   %s (%s), publicUrl %s\nadmin UI  %s\npolicy    %s\n", st.Gateway.Listen, state, st.Gateway.PublicURL, st.Admin.URL, st.Policy.Path)
	if st.Policy.Error != nil {
		fmt.Fprintf(env.Stdout, "          ERROR: %s\n", st.Policy.Error.Message)
	}
	for _, b := range st.Brands {
		fmt.Fprintf(env.Stdout, "brand     %s (%s, %s) %s\n", b.ID, b.Name, b.AccessMode, b.CardURL)
	}
	codex := "not found"
	if st.Codex.Found {
		codex = fmt.Sprintf("%s %s, signed in: %v", st.Codex.Path, st.Codex.Version, st.Codex.LoggedIn)
	}
	if st.Codex.Credential.Summary != "" {
		codex += "; credential: " + st.Codex.Credential.Summary
	}
	if st.Codex.Error != "" {
		codex += " — " + st.Codex.Error
	}
	fmt.Fprintf(env.Stdout, "codex     %s\n%s\npending   %d request(s)\nreach     %s\n", codex, st.Confinement.Text, st.Pending, reachLine(st.Reachability))
	return 0
}

func grants(args []string, env Env) int {
	if len(args) == 0 {
		fmt.Fprintln(env.Stderr, "usage: aether grants list|revoke ID [--data-dir D]")
		return 2
	}
	fs := newFlags("grants "+args[0], env)
	dir := fs.String("data-dir", "", "the node's data dir")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	c, err := newNodeClient(*dir)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether grants:", err)
		return 1
	}
	type grant struct {
		ID     string
		Agent  struct{ Claim, Host string } // what every front door shows (docs/threats.md C13)
		Brand  struct{ ID string }
		Scope  struct{ ID string }
		Status string
		Uses   int64
	}
	switch args[0] {
	case "list":
		var out struct{ Grants []grant }
		if err := c.do("GET", "/v1/grants", &out); err != nil {
			fmt.Fprintln(env.Stderr, "aether grants:", err)
			return 1
		}
		for _, g := range out.Grants {
			fmt.Fprintf(env.Stdout, "%s  %-8s agent %s (host %s)  brand=%s scope=%s uses=%d\n", g.ID, g.Status, g.Agent.Claim, g.Agent.Host, g.Brand.ID, g.Scope.ID, g.Uses)
		}
		return 0
	case "revoke":
		if fs.NArg() != 1 {
			fmt.Fprintln(env.Stderr, "usage: aether grants revoke ID [--data-dir D]")
			return 2
		}
		var out struct{ Grant grant }
		if err := c.do("POST", "/v1/grants/"+fs.Arg(0)+"/revoke", &out); err != nil {
			fmt.Fprintln(env.Stderr, "aether grants:", err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "%s is %s\n", out.Grant.ID, out.Grant.Status)
		return 0
	}
	fmt.Fprintln(env.Stderr, "usage: aether grants list|revoke ID [--data-dir D]")
	return 2
}
