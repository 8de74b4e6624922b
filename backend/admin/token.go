package admin

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"

	"github.com/aether/aether/backend/fsutil"
)

// LoadOrCreateToken returns the admin token kept in path (<data-dir>/admin.token), creating it
// first if there is none: 32 random bytes, base64url, mode 0600, written atomically.
//
// A token file that other users could read or write is refused rather than fixed: its token may
// already be known, and tightening the mode would not change that. Deleting the file makes the
// next start create a new token.
func LoadOrCreateToken(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewToken(path)
	}
	if err != nil {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("admin token %s is not a regular file", path)
	}
	// Windows reports no real permission bits; the data dir's ACL protects the file there.
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("admin token %s is open to other users (mode %#o): delete it and start again to get a new token", path, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, 1024))
	if err != nil {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if raw, err := base64.RawURLEncoding.DecodeString(tok); err != nil || len(raw) != 32 {
		return "", fmt.Errorf("admin token %s is not a valid token: delete it and start again to get a new one", path)
	}
	return tok, nil
}

// NewToken writes a new admin token to path, replacing any there atomically (a crash leaves the
// old token or the new one, never a torn file), mode 0600, and returns it. A running node takes
// it in through Server.RotateToken; `aether admin new-token` calls one or the other (A6).
func NewToken(path string) (string, error) {
	tok := newSecret()
	if err := fsutil.WriteFileAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	return tok, nil
}
