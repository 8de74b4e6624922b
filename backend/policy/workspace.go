package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/aether/aether/backend/domain"
)

// portableProblem says why ws, as written, cannot name a workspace (P6, P8), or returns "".
// The rules hold on every OS so that a policy means the same wherever it is read; windows
// only decides whether drive-absolute paths and backslashes are native.
func portableProblem(ws string, windows bool) string {
	for _, r := range ws {
		if r < 0x20 || r == 0x7f {
			return "contains a control character; rename the folder"
		}
	}
	if strings.HasPrefix(ws, `\\`) || strings.HasPrefix(ws, "//") || strings.HasPrefix(ws, `/\`) || strings.HasPrefix(ws, `\/`) {
		return `is a UNC or device path (\\server\share, \\?\…, \\.\…); use a folder on a local disk`
	}
	if strings.HasPrefix(ws, "~") {
		return "starts with ~, which is not expanded; write the folder relative to the policy's folder, or as an absolute path"
	}
	for _, c := range `<>"|?*` {
		if strings.ContainsRune(ws, c) {
			return fmt.Sprintf("contains %q, which Windows does not allow in paths; rename the folder", c)
		}
	}
	rest := ws
	if len(ws) >= 2 && ws[1] == ':' && isLetter(ws[0]) {
		if len(ws) == 2 || (ws[2] != '\\' && ws[2] != '/') {
			return fmt.Sprintf(`is relative to the current folder of drive %c:, which changes; write %c:\folder`, ws[0], ws[0])
		}
		if !windows {
			return "is a Windows drive path; on this system write a path that starts with /"
		}
		rest = ws[2:]
	}
	if strings.ContainsRune(rest, ':') {
		return `contains ":", which on Windows names an alternate data stream (file.txt:stream); remove it`
	}
	if !windows && strings.ContainsRune(ws, '\\') {
		return `contains \; separate folders with /`
	}
	if windows && rest == ws && (strings.HasPrefix(ws, `\`) || strings.HasPrefix(ws, "/")) {
		return `starts at the root of whatever drive is current; write the drive letter, e.g. C:\projects\app`
	}
	for _, elem := range strings.FieldsFunc(rest, func(r rune) bool { return r == '/' || r == '\\' }) {
		switch {
		case elem == "..":
			return `contains "..": name the folder directly, relative to the policy's folder or as an absolute path`
		case elem == ".":
			continue
		case isReservedName(elem):
			return fmt.Sprintf("%q is a reserved device name on Windows (CON, PRN, AUX, NUL, COM1–9, LPT1–9); rename the folder", elem)
		case strings.HasSuffix(elem, ".") || strings.HasSuffix(elem, " "):
			return fmt.Sprintf("%q ends with a dot or a space, which Windows drops; rename the folder", elem)
		}
	}
	return ""
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isReservedName reports Windows device names, which stay devices with any extension (nul.txt).
func isReservedName(elem string) bool {
	base, _, _ := strings.Cut(elem, ".")
	base = strings.ToUpper(strings.TrimRight(base, " "))
	switch base {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return true
	}
	if len(base) >= 4 && (strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT")) {
		switch base[3:] {
		case "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "¹", "²", "³":
			return true
		}
	}
	return false
}

// resolveBase makes the policy's folder absolute with symlinks evaluated.
func resolveBase(baseDir string) (string, error) {
	abs, err := filepath.Abs(baseDir)
	if err != nil {
		return "", fmt.Errorf("policy folder %s: %w", baseDir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("policy folder %s: %w", abs, err)
	}
	return real, nil
}

// homeDir is the user's home folder with symlinks evaluated, or "" when unknown.
func homeDir() string {
	h, err := os.UserHomeDir()
	if err != nil || h == "" {
		return ""
	}
	real, err := filepath.EvalSymlinks(h)
	if err != nil {
		return ""
	}
	return real
}

// resolveWorkspace applies the workspace rules of the package documentation and of Limits.
// base is the resolved policy folder, home the resolved home folder or "", writable whether the
// brand is read_write, bd the resolved data dir and policy file. It returns the resolved
// folder, or a message saying what is wrong.
func resolveWorkspace(ws, base, home string, writable bool, bd bounds) (string, string) {
	if ws == "" {
		return "", "is required: the folder Codex works in, relative to the policy's folder (e.g. \"workspace\") or absolute"
	}
	if msg := portableProblem(ws, runtime.GOOS == "windows"); msg != "" {
		return "", msg
	}
	absolute := filepath.IsAbs(ws)
	target := filepath.Join(base, ws)
	if absolute {
		target = filepath.Clean(ws)
	}
	real, err := filepath.EvalSymlinks(target)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Sprintf("folder %s does not exist; create it or correct the path", target)
	}
	if err != nil {
		return "", fmt.Sprintf("cannot resolve %s: %v", target, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Sprintf("cannot read %s: %v", real, err)
	}
	if !fi.IsDir() {
		return "", fmt.Sprintf("%s is a file, not a folder", target)
	}
	if msg := exposureProblem(real, writable, home, bd); msg != "" {
		return "", msg
	}
	switch {
	case samePath(real, base):
		return "", "is the policy's own folder; use a subfolder, so that policy.json stays out of the agent's reach"
	case inside(base, real):
		return "", fmt.Sprintf("%s contains the policy's folder %s; use a folder that does not hold policy.json", real, base)
	case bd.policyFile != "" && inside(bd.policyFile, real):
		return "", fmt.Sprintf("this %s workspace contains the policy file %s (reached through a symlink), and a turn sees all of its workspace, so it could %s it; choose a folder that does not hold the file, or move the file out of it", modeOf(writable), bd.policyFile, could(writable))
	}
	if !absolute {
		if !inside(real, base) {
			return "", fmt.Sprintf("leads through a symlink to %s, outside the policy's folder %s; point it at a folder inside the policy's folder, or write an absolute path", real, base)
		}
		return real, ""
	}
	if !samePath(real, target) {
		return "", fmt.Sprintf("goes through a symlink (it resolves to %s); write the real path %s instead", real, real)
	}
	if inside(real, base) || (home != "" && inside(real, home)) {
		return real, ""
	}
	roots := "the policy's folder " + base
	if home != "" {
		roots += " and your home folder " + home
	}
	return "", fmt.Sprintf("%s is outside the allowed roots (%s); move the workspace there, or keep policy.json next to it", real, roots)
}

// exposureProblem says why a turn's view of the resolved workspace real would show what no
// turn may see (Limits; docs/confinement.md, docs/threats.md W10–W12, W24), or returns "". The
// policy file is left to the checks of the policy's folder, whose messages say more.
func exposureProblem(real string, writable bool, home string, bd bounds) string {
	const dataDirHolds = "node key, admin token, pact.sqlite"
	switch {
	case filepath.Dir(real) == real:
		return fmt.Sprintf(`"%s" is the root of the file system; a brand may offer a folder, never the whole disk`, real)
	case home != "" && samePath(real, home):
		return fmt.Sprintf(`"%s" is your home folder; a brand may offer a folder inside it, never the whole of it`, real)
	case home != "" && inside(home, real):
		return fmt.Sprintf("%s contains your home folder %s (~/.ssh, ~/.config, your other projects); a brand may offer a folder inside your home, never one around it", real, home)
	case bd.dataDir == "":
	case samePath(real, bd.dataDir):
		return fmt.Sprintf(`"%s" is the node's data dir (%s); a brand must never offer it: choose a project folder outside it`, real, dataDirHolds)
	case inside(bd.dataDir, real):
		return fmt.Sprintf("this %s workspace contains the data dir %s (%s), and a turn sees all of its workspace, so it could %s them; choose a folder that does not", modeOf(writable), bd.dataDir, dataDirHolds, could(writable))
	case inside(real, bd.dataDir):
		return fmt.Sprintf("this %s workspace lies inside the data dir %s, where the node keeps its own files (every agent's Codex sessions and turn scratch in codex/ among them), so a turn could %s them; choose a folder outside the data dir",
			modeOf(writable), bd.dataDir, could(writable))
	}
	return ""
}

func modeOf(writable bool) domain.AccessMode {
	if writable {
		return domain.ReadWrite
	}
	return domain.ReadOnly
}

// could is what a turn could do to a file in its workspace.
func could(writable bool) string {
	if writable {
		return "read and change"
	}
	return "read"
}

func samePath(a, b string) bool { return pathKey(a) == pathKey(b) }

// inside reports whether child lies strictly below parent.
func inside(child, parent string) bool {
	rel, err := filepath.Rel(pathKey(parent), pathKey(child))
	if err != nil || rel == "." || filepath.IsAbs(rel) {
		return false
	}
	return rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
