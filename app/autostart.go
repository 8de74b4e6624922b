package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aether/aether/backend/fsutil"
)

// loginItem is the "Start at login" entry: an XDG autostart file,
// $XDG_CONFIG_HOME/autostart/aether.desktop (~/.config/autostart/aether.desktop), that
// starts the app hidden in the tray.
type loginItem struct {
	path string // the autostart file
	exe  string // this program
}

func newLoginItem() (loginItem, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return loginItem{}, fmt.Errorf("find the autostart folder: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	exe, err := os.Executable()
	if err != nil {
		return loginItem{}, fmt.Errorf("find this program: %w", err)
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	return loginItem{path: filepath.Join(dir, "autostart", "aether.desktop"), exe: exe}, nil
}

func (l loginItem) enabled() bool {
	_, err := os.Stat(l.path)
	return err == nil
}

func (l loginItem) set(on bool) error {
	if !on {
		if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the login item: %w", err)
		}
		return nil
	}
	if strings.ContainsAny(l.exe, "\r\n") {
		return fmt.Errorf("this program's path %q cannot be written into a desktop entry", l.exe)
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return fmt.Errorf("create the autostart folder: %w", err)
	}
	if err := fsutil.WriteFileAtomic(l.path, []byte(l.entry()), 0o644); err != nil {
		return fmt.Errorf("write the login item: %w", err)
	}
	return nil
}

// entry is the desktop entry; the environment variable makes the app start in the tray.
func (l loginItem) entry() string {
	return "[Desktop Entry]\n" +
		"Type=Application\n" +
		"Name=Aether\n" +
		"Comment=Start Aether in the tray\n" +
		"Exec=env AETHER_START_HIDDEN=1 " + execQuote(l.exe) + "\n" +
		"Icon=aether\n" +
		"Terminal=false\n" +
		"X-GNOME-Autostart-enabled=true\n"
}

// execQuote quotes one argument of a desktop entry's Exec key: double quotes around
// anything but plain path characters, with ", `, $ and \ escaped inside, "%" doubled, and
// the string-value escaping of backslashes on top (Desktop Entry Specification, "The Exec key").
func execQuote(arg string) string {
	arg = strings.ReplaceAll(arg, "%", "%%")
	plain := arg != ""
	for _, r := range arg {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+%", r)) {
			plain = false
			break
		}
	}
	if plain {
		return arg
	}
	q := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`", `$`, `\$`).Replace(arg)
	// The whole value is then a string value, where a backslash is written \\.
	return `"` + strings.ReplaceAll(q, `\`, `\\`) + `"`
}
