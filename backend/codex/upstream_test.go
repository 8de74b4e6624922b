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

// TestUpstreamRealCodex points the real codex at a server set in the window (the mock model),
// with no provider options of the test's own: the window's key is the bearer token, the
// window's model is asked for, and a key meant for OpenAI never reaches that server.
func TestUpstreamRealCodex(t *testing.T) {
	bin := realCodex(t)
	const windowKey, openAIKey = "sk-window-7f3a9c1e5b2d", "sk-openai-env-4e8b1a6c9d"
	run := func(t *testing.T, up Upstream, answers ...mockmodel.Step) (Result, []mockmodel.Request) {
		model := mockmodel.New(answers...)
		defer model.Close()
		up.BaseURL = model.BaseURL()
		r := &Runner{Path: bin, Home: codextest.Home(t), Timeout: 2 * time.Minute,
			Env:      []string{"CODEX_API_KEY=" + openAIKey}, // the node's own, for OpenAI
			Upstream: func() (Upstream, error) { return up, nil },
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil))}
		t.Cleanup(r.Wait)
		res, err := r.Probe(context.Background(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return res, model.Requests()
	}
	t.Run("X10 the window's key, not the node's CODEX_API_KEY, goes to the server the owner named", func(t *testing.T) {
		res, reqs := run(t, Upstream{Key: windowKey, Model: "gpt-window-test"}, mockmodel.Message("OK"))
		if res.Status != StatusCompleted || ProbeAnswer(res) != "OK" {
			t.Fatalf("probe %+v", res)
		}
		if len(reqs) == 0 || reqs[0].Header.Get("Authorization") != "Bearer "+windowKey {
			t.Fatalf("the upstream got Authorization %q", reqs[0].Header.Get("Authorization"))
		}
		if !strings.Contains(string(reqs[0].Body), `"model":"gpt-window-test"`) {
			t.Errorf("the window's model was not asked for: %.300s", reqs[0].Body)
		}
	})
	t.Run("a server set without a key gets no key at all", func(t *testing.T) {
		res, reqs := run(t, Upstream{}, mockmodel.Message("OK"))
		if res.Status != StatusCompleted {
			t.Fatalf("probe %+v", res)
		}
		for _, req := range reqs {
			for name, vals := range req.Header {
				if strings.Contains(strings.Join(vals, " "), openAIKey) {
					t.Errorf("the server got CODEX_API_KEY in %s", name)
				}
			}
		}
	})
	t.Run("the exact error of a refused key", func(t *testing.T) {
		res, _ := run(t, Upstream{Key: windowKey}, mockmodel.HTTPError(401,
			`{"error":{"message":"Incorrect API key provided: sk-wi****9c1e.","type":"invalid_request_error","code":"invalid_api_key"}}`))
		if res.Status != StatusFailed || !strings.Contains(res.Reason, "401 Unauthorized") || strings.Contains(res.Reason, windowKey) {
			t.Fatalf("probe %+v", res)
		}
		t.Logf("reason: %s", res.Reason)
	})
}

// TestUpstreamArgs: the window's server and model become `-c` options that the allow-list
// takes; a value that would smuggle a setting in is refused before codex starts (X8).
func TestUpstreamArgs(t *testing.T) {
	args, err := upstreamArgs(Upstream{BaseURL: "https://llm.example/v1", Key: "k", Model: "gpt-5"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-c", `model_provider="aether"`,
		"-c", `model_providers.aether={name="Aether upstream",base_url="https://llm.example/v1",wire_api="responses",env_key="CODEX_API_KEY"}`,
		"-c", `model="gpt-5"`}
	if !slices.Equal(args, want) {
		t.Fatalf("args %q", args)
	}
	for _, up := range []Upstream{
		{BaseURL: `http://127.0.0.1:1/v1",wire_api="responses"},sandbox_mode="danger-full-access`},
		{BaseURL: "https://llm.example/v1\nsandbox_mode=\"danger-full-access\""},
		{Model: `gpt"` + "\n" + `approval_policy="never`},
		{Model: `gpt\u0022`},
	} {
		t.Run("X8 "+strings.ReplaceAll(up.BaseURL+up.Model, "\n", `\n`), func(t *testing.T) {
			f := newFixture(t)
			f.r.Upstream = func() (Upstream, error) { return up, nil }
			res, err := f.r.Run(context.Background(), f.req(codextest.ScenarioOK), nil)
			if err == nil || res.Status != StatusFailed {
				t.Fatalf("ran with %+v: %+v", up, res)
			}
			if recs := f.records(t); len(recs) != 0 {
				t.Fatalf("codex started: %+v", recs)
			}
		})
	}
}

// TestUpstreamKeyOnlyInEnvironment: the window's key reaches codex in its environment, never on
// a command line, and the commands codex runs are told to inherit only its core variables.
func TestUpstreamKeyOnlyInEnvironment(t *testing.T) {
	const key = "sk-window-only-env-51c0"
	f := newFixture(t)
	f.r.Upstream = func() (Upstream, error) { return Upstream{Key: key}, nil }
	if c, _ := f.r.credential(); c.Kind != CredentialAPIKeyStored {
		t.Fatalf("credential %+v, want the window's key first", c)
	}
	res := f.run(t, f.req(codextest.ScenarioOK))
	if res.Status != StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	rec := f.records(t)[0]
	if strings.Contains(strings.Join(rec.Argv, " "), key) {
		t.Errorf("the key is on codex's command line: %q", rec.Argv)
	}
	if !slices.Contains(rec.Env, "CODEX_API_KEY="+key) {
		t.Errorf("codex's environment lacks the window's key: %q", rec.Env)
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
