// Package datadir is the node's data dir: where it is by default, its lock, the name of every
// file in it, node.json for local tools, the policy file the desktop last used, and the
// offline verbs' access to it while no node runs (rotate the key, a new admin token, verify
// and export receipts).
package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/aether/aether/backend/fsutil"
)

// Files inside the data dir, besides the key ring's (backend/keys).
const (
	LockFile        = "node.lock"
	TLSCertFile     = "admin-tls.crt"
	TLSKeyFile      = "admin-tls.key"
	TokenFile       = "admin.token"
	DBFile          = "pact.sqlite"
	AddressesFile   = "node.json"
	LastPolicyFile  = "last-policy"
	PolicyFile      = "policy.json"
	HeadFile        = "receipts.head" // the receipt chain's head, kept outside pact.sqlite
	CodexDir        = "codex"         // codex state per conversation, and each turn's scratch
	CodexBinDir     = "codex-bin"     // the pinned Codex, got from the window (backend/codexget)
	TailscaleDir    = "tailscale"     // Tailscale Funnel's node state (backend/reach), mode 0700
	IdentityKeyFile = "identity.key"  // the owner's agents' issuer key (backend/issuer): not the receipts key
	AgentsFile      = "agents.json"   // the owner's agents the node issues identities for
	DevicesFile     = "devices.json"  // the owner's paired phones (backend/devices), mode 0600
)

// Default is the per-user data folder of the OS: $XDG_DATA_HOME/aether/node
// (~/.local/share/aether/node) on Linux, ~/Library/Application Support/Aether/node
// on macOS, %LocalAppData%\Aether\node on Windows.
func Default() (string, error) {
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

// prepare creates the folder 0700 and refuses one that others can enter.
func prepare(dir string) error {
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

// Dir is a data dir opened by the node that runs on it: its absolute path, locked.
type Dir struct {
	Path string
	lock *os.File
}

// Open makes path (Default when "") the node's data dir: created 0700 if need be, refused if
// others can enter it, and locked (ErrLocked when another node runs on it).
func Open(path string) (*Dir, error) {
	if path == "" {
		var err error
		if path, err = Default(); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := prepare(abs); err != nil {
		return nil, err
	}
	d := &Dir{Path: abs}
	if d.lock, err = lock(d.File(LockFile)); err != nil {
		return nil, err
	}
	return d, nil
}

// File is name inside the data dir.
func (d *Dir) File(name string) string { return filepath.Join(d.Path, name) }

// Close lets the data dir go: node.json goes (no node answers there any more), then the lock.
func (d *Dir) Close() {
	os.Remove(d.File(AddressesFile))
	d.lock.Close()
}

// Addresses are the node's listeners as bound, in node.json for local tools.
type Addresses struct {
	Gateway   string `json:"gateway"`
	Admin     string `json:"admin"`
	API       string `json:"api"`
	PublicURL string `json:"publicUrl"`
	PID       int    `json:"pid"`
}

// WriteAddresses writes node.json.
func (d *Dir) WriteAddresses(a Addresses) error {
	data, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(d.File(AddressesFile), append(data, '\n'), 0o600)
}

// PolicyPath picks the policy file: flag when given, else the one last used (RememberPolicy)
// if it is still there, else <data dir>/policy.json.
func (d *Dir) PolicyPath(flag string) string {
	if flag != "" {
		if p, err := filepath.Abs(flag); err == nil {
			return p
		}
		return flag
	}
	if last, err := os.ReadFile(d.File(LastPolicyFile)); err == nil {
		if p := strings.TrimSpace(string(last)); filepath.IsAbs(p) {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	return d.File(PolicyFile)
}

// RememberPolicy notes path as the policy file to use next time (the desktop's default).
func (d *Dir) RememberPolicy(path string) error {
	return fsutil.WriteFileAtomic(d.File(LastPolicyFile), []byte(path+"\n"), 0o600)
}
