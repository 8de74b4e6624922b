package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aether/aether/backend/fsutil"
)

// TokenKey names a saved delegation token: one per node, brand and agent
// identity (a token is bound to the identity it was issued to). Node is the
// publicUrl the card gives.
type TokenKey struct {
	Node    string `json:"node"`
	Brand   string `json:"brand"`
	Issuer  string `json:"iss"`
	Subject string `json:"sub"`
}

type savedToken struct {
	TokenKey
	Token     string    `json:"token"`
	Scope     string    `json:"scope,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

type tokenFile struct {
	Tokens []savedToken `json:"tokens"`
}

// tokenStore keeps delegation tokens in a 0600 file in the agent's folder so
// a later run needs no consent. Two runs saving at once may lose one entry;
// the agent then refreshes or asks again.
type tokenStore struct {
	path string
	now  func() time.Time
}

func (s tokenStore) read() (tokenFile, error) {
	var f tokenFile
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("read saved tokens: %w", err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return tokenFile{}, fmt.Errorf("saved tokens %s: %w", s.path, err)
	}
	return f, nil
}

// load returns the saved token for k, or nil.
func (s tokenStore) load(k TokenKey) (*Token, error) {
	f, err := s.read()
	if err != nil {
		return nil, err
	}
	for _, t := range f.Tokens {
		if t.TokenKey == k {
			return &Token{AccessToken: t.Token, Scope: t.Scope, ExpiresAt: t.ExpiresAt}, nil
		}
	}
	return nil, nil
}

// save stores t for k (nil forgets k) and drops expired tokens.
func (s tokenStore) save(k TokenKey, t *Token) error {
	f, err := s.read()
	if err != nil {
		f = tokenFile{} // an unreadable file is replaced rather than block the agent
	}
	now := s.now()
	kept := f.Tokens[:0]
	for _, old := range f.Tokens {
		if old.TokenKey != k && (old.ExpiresAt.IsZero() || old.ExpiresAt.After(now)) {
			kept = append(kept, old)
		}
	}
	if t != nil {
		kept = append(kept, savedToken{TokenKey: k, Token: t.AccessToken, Scope: t.Scope, ExpiresAt: t.ExpiresAt.UTC()})
	}
	f.Tokens = kept
	if f.Tokens == nil {
		f.Tokens = []savedToken{}
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("save token: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("save token: %w", err)
	}
	if err := fsutil.WriteFileAtomic(s.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save token: %w", err)
	}
	return nil
}

// LoadToken is the delegation token the agent folder dir keeps for k (nil if none): what
// another client of the package (an MCP server) reuses of `aether agent`'s tokens.
func LoadToken(dir string, k TokenKey) (*Token, error) {
	return tokenStore{path: filepath.Join(dir, tokensFile), now: time.Now}.load(k)
}

// SaveToken keeps t for k in the agent folder dir (nil forgets k), dropping expired tokens.
func SaveToken(dir string, k TokenKey, t *Token) error {
	return tokenStore{path: filepath.Join(dir, tokensFile), now: time.Now}.save(k, t)
}
