package codex

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codex/mockmodel"
)

// TestProviderRealCodex points the real codex at a turn's Provider (the mock model stands in
// for the node's model gateway), with no provider options of the test's own: the pass's token
// is the bearer token, the pass's model is asked for, and the node's own CODEX_API_KEY never
// reaches the server.
func TestProviderRealCodex(t *testing.T) {
	bin := realCodex(t)
	const token, openAIKey = "aether-turn-7f3a9c1e5b2d", "sk-openai-env-4e8b1a6c9d"
	run := func(t *testing.T, answers ...mockmodel.Step) (Result, []mockmodel.Request) {
		model := mockmodel.New(answers...)
		defer model.Close()
		r := &Runner{Path: bin, Home: codextest.Home(t), Timeout: 2 * time.Minute, RequireProvider: true,
			Env:    []string{"CODEX_API_KEY=" + openAIKey}, // the node's own, for OpenAI
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		t.Cleanup(r.Wait)
		res, err := r.ProbeVia(context.Background(), t.TempDir(), &Provider{BaseURL: model.BaseURL(), Token: token, Model: "gpt-pass-test"})
		if err != nil {
			t.Fatal(err)
		}
		return res, model.Requests()
	}
	t.Run("the pass's token, not the node's CODEX_API_KEY, goes to the gateway", func(t *testing.T) {
		res, reqs := run(t, mockmodel.Message("OK"))
		if res.Status != StatusCompleted || ProbeAnswer(res) != "OK" {
			t.Fatalf("probe %+v", res)
		}
		if len(reqs) == 0 || reqs[0].Header.Get("Authorization") != "Bearer "+token {
			t.Fatalf("the gateway got Authorization %q", reqs[0].Header.Get("Authorization"))
		}
		for _, req := range reqs {
			for name, vals := range req.Header {
				if strings.Contains(strings.Join(vals, " "), openAIKey) {
					t.Errorf("the gateway got CODEX_API_KEY in %s", name)
				}
			}
		}
		if !strings.Contains(string(reqs[0].Body), `"model":"gpt-pass-test"`) {
			t.Errorf("the pass's model was not asked for: %.300s", reqs[0].Body)
		}
	})
	t.Run("the exact error of a refused request", func(t *testing.T) {
		res, _ := run(t, mockmodel.HTTPError(401,
			`{"error":{"message":"the owner's model server refused the request (HTTP 401)","type":"invalid_request_error","code":"upstream_refused"}}`))
		if res.Status != StatusFailed || !strings.Contains(res.Reason, "401 Unauthorized") || strings.Contains(res.Reason, token) {
			t.Fatalf("probe %+v", res)
		}
		t.Logf("reason: %s", res.Reason)
	})
}

// TestUpstreamArgs: the window's server and model become `-c` options that the allow-list
// takes; a value that would smuggle a setting in is refused before codex starts (X8).
func TestUpstreamArgs(t *testing.T) {
	args, err := upstreamArgs(Provider{BaseURL: "https://llm.example/v1", Token: "aether-turn-x", Model: "gpt-5"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-c", `model_provider="aether"`,
		"-c", `model_providers.aether={name="Aether upstream",base_url="https://llm.example/v1",wire_api="responses",env_key="CODEX_API_KEY"}`,
		"-c", `model="gpt-5"`}
	if !slices.Equal(args, want) {
		t.Fatalf("args %q", args)
	}
	for _, up := range []Provider{
		{BaseURL: `http://127.0.0.1:1/v1",wire_api="responses"},sandbox_mode="danger-full-access`},
		{BaseURL: "https://llm.example/v1\nsandbox_mode=\"danger-full-access\""},
		{Model: `gpt"` + "\n" + `approval_policy="never`},
		{Model: `gpt\u0022`},
	} {
		t.Run("X8 "+strings.ReplaceAll(up.BaseURL+up.Model, "\n", `\n`), func(t *testing.T) {
			f := newFixture(t)
			f.r.Upstream = func() (Upstream, error) { return Upstream{Model: up.Model}, nil }
			req := f.req(codextest.ScenarioOK)
			if up.BaseURL != "" {
				req.Provider = &Provider{BaseURL: up.BaseURL, Token: "aether-turn-x"}
			}
			res, err := f.r.Run(context.Background(), req, nil)
			if err == nil || res.Status != StatusFailed || !strings.Contains(res.Reason, "refused") {
				t.Fatalf("ran with %+v: %+v", up, res)
			}
			if recs := f.records(t); len(recs) != 0 {
				t.Fatalf("codex started: %+v", recs)
			}
		})
	}
}

// TestWindowOnlyThroughGateway: a server or key set in the window is reached through the
// node's model gateway alone: the runner never holds the key, and a turn without a pass is
// refused before codex starts; the pass's token reaches codex in its environment, never on a
// command line, and the commands codex runs are told to inherit only its core variables.
func TestWindowOnlyThroughGateway(t *testing.T) {
	f := newFixture(t)
	f.r.Upstream = func() (Upstream, error) { return Upstream{KeySet: true}, nil }
	if c := f.r.credential(); c.Kind != CredentialAPIKeyStored {
		t.Fatalf("credential %+v, want the window's key first", c)
	}
	res, err := f.r.Run(context.Background(), f.req(codextest.ScenarioOK), nil)
	if !errors.Is(err, ErrNoProvider) || res.Status != StatusFailed {
		t.Fatalf("a turn without a pass: %+v, %v", res, err)
	}
	if recs := f.records(t); len(recs) != 0 {
		t.Fatalf("codex started: %+v", recs)
	}
	const token = "aether-turn-only-env-51c0"
	req := f.req(codextest.ScenarioOK)
	req.Provider = &Provider{BaseURL: "http://127.0.0.1:1/v1", Token: token}
	if res := f.run(t, req); res.Status != StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	rec := f.records(t)[0]
	if strings.Contains(strings.Join(rec.Argv, " "), token) {
		t.Errorf("the token is on codex's command line: %q", rec.Argv)
	}
	if !slices.Contains(rec.Env, "CODEX_API_KEY="+token) {
		t.Errorf("codex's environment lacks the pass's token: %q", rec.Env)
	}
	if !slices.Contains(rec.Config, `shell_environment_policy.inherit="core"`) {
		t.Errorf("config %q", rec.Config)
	}
}

// TestUpstreamUnreadable: settings that cannot be read stop turns with the reason.
func TestUpstreamUnreadable(t *testing.T) {
	f := newFixture(t)
	f.r.Upstream = func() (Upstream, error) { return Upstream{}, errors.New("model.json: bad") }
	res, err := f.r.Run(context.Background(), f.req(codextest.ScenarioOK), nil)
	if err == nil || !strings.Contains(res.Reason, "cannot read the model settings: model.json: bad") {
		t.Fatalf("%+v, %v", res, err)
	}
}
