// Package model keeps how Codex reaches its model, as the owner set it in the window: the API
// key (model.key, mode 0600, never shown back or logged), an OpenAI-compatible Responses server
// and a model name, and the path of a Codex the owner installed (model.json). Both files live in
// the node's data dir, which no turn's view holds (docs/confinement.md, "The credential").
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/aether/aether/backend/fsutil"
)

// Files in the data dir.
const (
	FileKey      = "model.key"
	FileSettings = "model.json"
)

// ErrInvalid: a value the owner entered is refused; the message says why.
var ErrInvalid = errors.New("invalid model setting")

// Settings are model.json. None is secret; the key is kept apart.
type Settings struct {
	BaseURL   string `json:"baseUrl,omitempty"`   // "" = Codex's own provider (OpenAI)
	Model     string `json:"model,omitempty"`     // "" = Codex's default model
	CodexPath string `json:"codexPath,omitempty"` // a Codex the owner installed; "" = none chosen
}

// Store reads and writes the files in Dir. Writes are atomic and serialized.
type Store struct {
	Dir string
	mu  sync.Mutex
}

// Settings reads model.json; a missing file is the zero Settings.
func (s *Store) Settings() (Settings, error) {
	var st Settings
	data, err := os.ReadFile(filepath.Join(s.Dir, FileSettings))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s: %w", filepath.Join(s.Dir, FileSettings), err)
	}
	return st, nil
}

// Key reads model.key; "" when none is set.
func (s *Store) Key() (string, error) {
	data, err := os.ReadFile(filepath.Join(s.Dir, FileKey))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the model key: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// SetKey stores key (surrounding white space trimmed), replacing any, readable by this user only.
func (s *Store) SetKey(key string) error {
	key = strings.TrimSpace(key)
	if err := CheckKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return fsutil.WriteFileAtomic(filepath.Join(s.Dir, FileKey), []byte(key+"\n"), 0o600)
}

// RemoveKey forgets the key; removing none is no error.
func (s *Store) RemoveKey() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Remove(filepath.Join(s.Dir, FileKey)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return fsutil.SyncDir(s.Dir)
}

// Update changes the settings with fn, after checking what it set.
func (s *Store) Update(fn func(*Settings)) (Settings, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.Settings()
	if err != nil {
		return st, err
	}
	fn(&st)
	if st.BaseURL, err = CheckBaseURL(st.BaseURL); err != nil {
		return st, err
	}
	if err := CheckModel(st.Model); err != nil {
		return st, err
	}
	if st.CodexPath != "" && !filepath.IsAbs(st.CodexPath) {
		return st, fmt.Errorf("%w: the Codex path must be absolute", ErrInvalid)
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return st, err
	}
	return st, fsutil.WriteFileAtomic(filepath.Join(s.Dir, FileSettings), append(data, '\n'), 0o600)
}

// CheckKey admits a key of printable ASCII without spaces, as API keys are: it goes into an
// environment variable and an Authorization header.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: the key is empty", ErrInvalid)
	}
	if len(key) > 1024 {
		return fmt.Errorf("%w: the key is longer than 1024 characters", ErrInvalid)
	}
	for _, r := range key {
		if r <= ' ' || r > '~' {
			return fmt.Errorf("%w: the key holds a space or a character that is not printable ASCII", ErrInvalid)
		}
	}
	return nil
}

// CheckBaseURL admits "" or an http(s) URL with a host and a path, no user, query or fragment,
// in printable ASCII without quotes or backslashes (it becomes a TOML string in a `-c` option).
// Plain http only to this machine: the key would cross the network in clear.
func CheckBaseURL(raw string) (string, error) {
	raw = strings.TrimRight(strings.TrimSpace(raw), "/")
	if raw == "" {
		return "", nil
	}
	for _, r := range raw {
		if r <= ' ' || r > '~' || r == '"' || r == '\\' || r == '\'' {
			return "", fmt.Errorf("%w: the base URL holds a space, a quote, a backslash or a character that is not printable ASCII", ErrInvalid)
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("%w: the base URL must look like https://host/v1", ErrInvalid)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("%w: the base URL takes no user, query or fragment", ErrInvalid)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopback(u.Hostname()) {
			return "", fmt.Errorf("%w: plain http only to this machine (localhost, 127.0.0.1, ::1); use https for %s", ErrInvalid, u.Hostname())
		}
	default:
		return "", fmt.Errorf("%w: the base URL must start with https://", ErrInvalid)
	}
	return raw, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckModel admits "" or a model name without spaces, quotes, backslashes or controls.
func CheckModel(m string) error {
	if len(m) > 200 || strings.HasPrefix(m, "-") {
		return fmt.Errorf("%w: the model name must be at most 200 characters and not start with -", ErrInvalid)
	}
	for _, r := range m {
		if r <= ' ' || r > '~' || r == '"' || r == '\\' || r == '\'' {
			return fmt.Errorf("%w: the model name holds a space, a quote, a backslash or a character that is not printable ASCII", ErrInvalid)
		}
	}
	return nil
}
