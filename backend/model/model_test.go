package model

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestKey(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	if k, err := s.KeyFor(OpenAIBaseURL); k != "" || err != nil {
		t.Fatalf("no key yet: %q, %v", k, err)
	}
	if err := s.SetKey("  sk-first-0123\n"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(s.Dir, FileKey))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("model.key: %v, %v; want mode 0600", st.Mode(), err)
	}
	if err := s.SetKey("sk-second-4567"); err != nil {
		t.Fatal(err)
	}
	if k, _ := s.KeyFor(OpenAIBaseURL); k != "sk-second-4567" {
		t.Fatalf("replaced key reads %q", k)
	}
	if err := s.RemoveKey(); err != nil {
		t.Fatal(err)
	}
	if k, _ := s.KeyFor(OpenAIBaseURL); k != "" {
		t.Fatalf("removed key reads %q", k)
	}
	if err := s.RemoveKey(); err != nil {
		t.Fatalf("removing no key: %v", err)
	}
	for _, bad := range []string{"", "sk with space", "sk-\x00", "sk-é", string(make([]byte, 1025))} {
		if err := s.SetKey(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetKey(%q): %v", bad, err)
		}
	}
}

func TestSettings(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	got, err := s.Update(func(st *Settings) { st.BaseURL, st.Model = "https://llm.example/v1/", "gpt-5" })
	if err != nil || got.BaseURL != "https://llm.example/v1" {
		t.Fatalf("%+v, %v", got, err)
	}
	if back, _ := s.Settings(); back != got {
		t.Fatalf("read back %+v, want %+v", back, got)
	}
	if st, _ := os.Stat(filepath.Join(s.Dir, FileSettings)); st.Mode().Perm() != 0o600 {
		t.Errorf("model.json mode %v", st.Mode())
	}
	for _, u := range []string{"http://127.0.0.1:8000/v1", "http://localhost/v1", "http://[::1]:1/v1", "https://10.0.0.1/v1"} {
		if _, err := CheckBaseURL(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{
		"http://llm.example/v1",                                 // the key in clear over the network
		"ftp://llm.example/v1", "llm.example/v1", "https:///v1", // not a server
		"https://user:pw@llm.example/v1", "https://llm.example/v1?x=1", "https://llm.example/v1#f",
		`https://llm.example/v1",sandbox_mode="danger-full-access`, // X8
		"https://llm.example/v1\nsandbox_mode=1", `https://llm.example/v1\`,
	} {
		if _, err := CheckBaseURL(u); !errors.Is(err, ErrInvalid) {
			t.Errorf("X8 base URL %q admitted: %v", u, err)
		}
	}
	for _, m := range []string{`gpt"`, "gpt 5", "-m", "gpt\n"} {
		if err := CheckModel(m); !errors.Is(err, ErrInvalid) {
			t.Errorf("X8 model %q admitted: %v", m, err)
		}
	}
	if _, err := s.Update(func(st *Settings) { st.CodexPath = "relative/codex" }); !errors.Is(err, ErrInvalid) {
		t.Errorf("a relative Codex path: %v", err)
	}
}

// TestKeyServer: a key belongs to the server it was saved with; one saved before keys were
// bound belongs to the server set then, and stays its when the server changes (M16).
func TestKeyServer(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(s.Dir, FileKey), []byte("sk-legacy-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, _ := s.KeyFor(OpenAIBaseURL); k != "sk-legacy-1" {
		t.Fatalf("a key of one line reads %q", k)
	}
	if _, err := s.Update(func(st *Settings) { st.BaseURL = "https://llm.example/v1" }); err != nil {
		t.Fatal(err)
	}
	if k, _ := s.KeyFor("https://llm.example/v1"); k != "" {
		t.Errorf("M16 the key saved for OpenAI is the new server's: %q", k)
	}
	if server, _ := s.KeyServer(); server != OpenAIBaseURL {
		t.Errorf("the key is saved for %q", server)
	}
	if k, _ := s.KeyFor(OpenAIBaseURL); k != "sk-legacy-1" {
		t.Errorf("the key is no longer OpenAI's: %q", k)
	}
	if _, err := s.Update(func(st *Settings) { st.BaseURL = "" }); err != nil {
		t.Fatal(err)
	}
	if k, _ := s.KeyFor(OpenAIBaseURL); k != "sk-legacy-1" {
		t.Errorf("back on OpenAI the key reads %q", k)
	}
}
