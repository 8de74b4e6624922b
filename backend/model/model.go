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

// OpenAIBaseURL is the server a key goes to when the owner names none.
const OpenAIBaseURL = "https://api.openai.com/v1"

// Server is the server settings send the key to: the base URL, else OpenAI's.
func (st Settings) Server() string {
	if st.BaseURL == "" {
		return OpenAIBaseURL
	}
	return st.BaseURL
}

// Host is the host of a model server's base URL, as the Status page and receipts name the
// server (the whole text when it is no URL).
func Host(baseURL string) string {
	if u, err := url.Parse(baseURL); err == nil && u.Host != "" {
		return u.Host
	}
	return baseURL
}

// savedKey is model.key: the key, and the server it was saved for (docs/threats.md M16). The
// file holds the key on its first line and the server on its second; a file of one line (a key
// saved before keys were bound) belongs to the server set now, and is bound to it before the
// server changes.
type savedKey struct {
	Key    string
	Server string
}

func (s *Store) saved() (savedKey, error) {
	data, err := os.ReadFile(filepath.Join(s.Dir, FileKey))
	if errors.Is(err, os.ErrNotExist) {
		return savedKey{}, nil
	}
	if err != nil {
		return savedKey{}, fmt.Errorf("read the model key: %w", err)
	}
	key, server, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	k := savedKey{Key: strings.TrimSpace(key), Server: strings.TrimSpace(server)}
	if k.Key != "" && k.Server == "" {
		st, err := s.Settings()
		if err != nil {
			return savedKey{}, err
		}
		k.Server = st.Server()
	}
	return k, nil
}

// KeyServer is the server the saved key belongs to, for the Status page: "" when no key is
// saved. It never reads the key out.
func (s *Store) KeyServer() (string, error) {
	k, err := s.saved()
	return k.Server, err
}

// KeyFor is the key saved for server: "" when none is saved, or it was saved for another
// server, as a key belongs to the server it was saved with (M16). The model gateway alone
// reads it, as it forwards a request (docs/model-gateway.md).
func (s *Store) KeyFor(server string) (string, error) {
	k, err := s.saved()
	if err != nil || k.Server != server {
		return "", err
	}
	return k.Key, nil
}

// SetKey stores key (surrounding white space trimmed) for the server set now, replacing any,
// readable by this user only.
func (s *Store) SetKey(key string) error {
	return s.Change(Change{Key: &key})
}

// RemoveKey forgets the key; removing none is no error.
func (s *Store) RemoveKey() error {
	return s.Change(Change{RemoveKey: true})
}

// Change is one change of the owner's: each field given changes that one.
type Change struct {
	BaseURL, Model *string
	Key            *string // saved for the server the change leaves set
	RemoveKey      bool
}

// Change checks every value first and changes nothing when one is refused; then writes the
// key, bound to the server it leaves set, and the settings. A key it does not replace stays
// bound to its own server.
func (s *Store) Change(c Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.Settings()
	if err != nil {
		return err
	}
	next := st
	if c.BaseURL != nil {
		if next.BaseURL, err = CheckBaseURL(*c.BaseURL); err != nil {
			return err
		}
	}
	if c.Model != nil {
		if err := CheckModel(*c.Model); err != nil {
			return err
		}
		next.Model = *c.Model
	}
	var key string
	switch {
	case c.Key != nil && c.RemoveKey:
		return fmt.Errorf("%w: give a key or removeKey, not both", ErrInvalid)
	case c.Key != nil:
		key = strings.TrimSpace(*c.Key)
		if err := CheckKey(key); err != nil {
			return err
		}
	}
	switch {
	case c.Key != nil:
		err = s.writeKey(savedKey{Key: key, Server: next.Server()})
	case c.RemoveKey:
		if err = os.Remove(filepath.Join(s.Dir, FileKey)); err == nil || errors.Is(err, os.ErrNotExist) {
			err = fsutil.SyncDir(s.Dir)
		}
	case next.Server() != st.Server():
		err = s.bindKey()
	}
	if err != nil || next == st {
		return err
	}
	return s.writeSettings(next)
}

// bindKey writes a key saved before keys were bound with the server it belongs to, before
// that server changes.
func (s *Store) bindKey() error {
	k, err := s.saved()
	if err != nil || k.Key == "" {
		return err
	}
	return s.writeKey(k)
}

func (s *Store) writeKey(k savedKey) error {
	return fsutil.WriteFileAtomic(filepath.Join(s.Dir, FileKey), []byte(k.Key+"\n"+k.Server+"\n"), 0o600)
}

// Update changes the settings with fn, after checking what it set. A key saved before keys
// were bound is bound to the server first, should it change.
func (s *Store) Update(fn func(*Settings)) (Settings, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.Settings()
	if err != nil {
		return st, err
	}
	next := st
	fn(&next)
	if next.BaseURL, err = CheckBaseURL(next.BaseURL); err != nil {
		return st, err
	}
	if err := CheckModel(next.Model); err != nil {
		return st, err
	}
	if next.CodexPath != "" && !filepath.IsAbs(next.CodexPath) {
		return st, fmt.Errorf("%w: the Codex path must be absolute", ErrInvalid)
	}
	if next.Server() != st.Server() {
		if err := s.bindKey(); err != nil {
			return st, err
		}
	}
	return next, s.writeSettings(next)
}

func (s *Store) writeSettings(st Settings) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(s.Dir, FileSettings), append(data, '\n'), 0o600)
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
