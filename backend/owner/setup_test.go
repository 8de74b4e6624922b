package owner

import "testing"

func TestReachable(t *testing.T) {
	for url, want := range map[string]bool{
		"https://aether.example.net":      true,
		"https://node.tail-scale.ts.net":  true,
		"http://aether.example.net":       false, // agents elsewhere need https
		"https://127.0.0.1:8443":          false,
		"https://localhost":               false,
		"https://app.localhost":           false,
		"https://[::1]:8443":              false,
		"":                                false,
		"aether.example.net":              false,
		"https://127.0.0.2/a2a/review/x/": false,
	} {
		if got, text := Reachable(url); got != want || text == "" {
			t.Errorf("Reachable(%q) = %v %q, want %v", url, got, text, want)
		}
	}
}

// TestSetupSteps: each step is done only when its own condition holds, and "ready" only when
// all of them do and the gateway serves.
func TestSetupSteps(t *testing.T) {
	st := Status{Gateway: GatewayStatus{PublicURL: "https://aether.example.net", Running: true}, Brands: []Brand{{ID: "review"}},
		Confinement: Confinement{Available: true}}
	st.Codex.Found, st.Codex.VersionOK, st.Codex.Version = true, true, "0.169.0"
	st.Codex.Credential.Summary = "API key set in Aether"
	done := func(st Status) map[string]bool {
		out := map[string]bool{}
		for _, s := range setupSteps(st) {
			out[s.ID] = s.Done
		}
		return out
	}
	if d := done(st); !d[StepCodex] || !d[StepModel] || !d[StepBrand] || !d[StepReachable] || !d[StepReady] {
		t.Fatalf("all set: %v", d)
	}
	for name, change := range map[string]func(*Status){
		StepCodex:     func(s *Status) { s.Confinement.Available = false },
		StepModel:     func(s *Status) { s.Model.Check = &ModelCheck{OK: false, Error: "401"} },
		StepBrand:     func(s *Status) { s.Brands = nil },
		StepReachable: func(s *Status) { s.Gateway.PublicURL = "http://127.0.0.1:8080" },
	} {
		s := st
		change(&s)
		if d := done(s); d[name] || d[StepReady] {
			t.Errorf("%s undone: %v", name, d)
		}
	}
	s := st
	s.Codex.Credential.Problem = "codex is not signed in"
	if d := done(s); d[StepModel] {
		t.Errorf("a credential problem leaves the model step done")
	}
	s = st
	s.Gateway.Running = false
	if d := done(s); d[StepReady] {
		t.Errorf("ready with the gateway stopped")
	}
}
