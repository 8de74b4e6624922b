package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/aether/aether/backend/keys"
)

// Files inside the data dir.
const (
	fileLock      = "node.lock"
	fileTLSCert   = "admin-tls.crt"
	fileTLSKey    = "admin-tls.key"
	fileToken     = "admin.token"
	fileDB        = "pact.sqlite"
	fileAddresses = "node.json"
	fileLastPol   = "last-policy"
	filePolicy    = "policy.json"
	dirCodex      = "codex" // codex state per conversation, and each turn's scratch
)

// DefaultDataDir is the per-user data folder of the OS: $XDG_DATA_HOME/aether/node
// (~/.local/share/aether/node) on Linux, ~/Library/Application Support/Aether/node
// on macOS, %LocalAppData%\Aether\node on Windows.
func DefaultDataDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the data folder: %w", err)
	}
	switch runtime.GOOS {
	case "darwin":
		return filepath.Join(home, "Library", "Application Support", "Aether", "node"), nil
	case "windows":
		if d := os.Getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "Aether", "node"), nil
		}
		return filepath.Join(home, "AppData", "Local", "Aether", "node"), nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "aether", "node"), nil
	}
	return filepath.Join(home, ".local", "share", "aether", "node"), nil
}

// prepareDataDir creates the folder 0700 and refuses one that others can enter.
func prepareDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s is not a folder", dir)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("data dir %s is open to other users (%v) and could not be closed: %w", dir, fi.Mode().Perm(), err)
		}
	}
	return nil
}

// ErrLocked means another node is running on the same data dir.
var ErrLocked = errors.New("another Aether node is already running on this data dir")

// RotateKey replaces the node's signing key (the node must be stopped: it
// takes the data dir's lock). Receipts signed before keep verifying: the old
// key stays in the JWKS, and it signed a statement naming its successor.
func RotateKey(dataDir string) (oldKID, newKID string, err error) {
	lock, err := lockDataDir(filepath.Join(dataDir, fileLock))
	if err != nil {
		return "", "", err
	}
	defer lock.Close()
	return keys.Rotate(dataDir, time.Now())
}
