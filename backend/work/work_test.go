package work

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/aether/aether/backend/jcs"
)

// TestText: what a receipt shows of a text Codex or a workspace chose reads as one line, in
// the order of its bytes, and no longer than its bound; the escapes cannot be forged by the
// text itself, since its own backslashes are doubled.
func TestText(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "ls -la 'a b'", "ls -la 'a b'"},
		{"S13 an ANSI escape that would clear a terminal", "ls\x1b[2J", `ls\x1b[2J`},
		{"S13 a newline that would fake a second command", "ls\nrm -rf /", `ls\x0arm -rf /`},
		{"S13 a bidi override that reverses a file name", "report\u202etxt.exe", `report\u{202e}txt.exe`},
		{"S13 a zero-width space and a line separator", "a\u200bb\u2028c", `a\u{200b}b\u{2028}c`},
		{"S13 bytes that are not UTF-8", "a\xffb", `a\xffb`},
		{"S13 a backslash that looks like an escape", `a\x1b`, `a\\x1b`},
		{"DEL and a C1 control", "a\x7fb\u0085", `a\x7fb\u{85}`},
		{"unicode text stays", "résumé 日本", "résumé 日本"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Text(c.in, 100)
			if got != c.want {
				t.Fatalf("Text(%q) = %q, want %q", c.in, got, c.want)
			}
			if !Shown(got, 100) {
				t.Fatalf("Shown(%q) is false for what Text wrote", got)
			}
		})
	}
	t.Run("S13 a huge line is cut, between characters, and says so", func(t *testing.T) {
		in := strings.Repeat("é", 1<<20) + "\x1b"
		got := Text(in, MaxCommandBytes)
		if !strings.HasSuffix(got, Cut) || len(got) > MaxCommandBytes+len(Cut) || !Shown(got, MaxCommandBytes) {
			t.Fatalf("cut to %d bytes: ...%q", len(got), got[len(got)-10:])
		}
		if body := strings.TrimSuffix(got, Cut); body != strings.Repeat("é", MaxCommandBytes/2) {
			t.Fatalf("cut is not at the last whole character: %d bytes", len(body))
		}
	})
	for _, bad := range []string{"ls\x1b[2J", "a\u202eb", "a\nb", `a\b`, `a\x1`, `a\u{}`, "a\xff", strings.Repeat("a", 101)} {
		if Shown(bad, 100) {
			t.Errorf("Shown(%q) is true: a text the node would have escaped or cut", bad)
		}
	}
}

// TestList: a list keeps its first MaxEntries items and counts every one; once cut, its
// digest is the SHA-256 over every entry's canonical JSON and a newline.
func TestList(t *testing.T) {
	var l List[Patch]
	full := sha256.New()
	for i := range MaxEntries + 5 {
		p := Patch{Path: strings.Repeat("x", i), Kind: "add", Status: "completed"}
		l.Add(p)
		b, _ := jcs.Marshal(p)
		full.Write(append(b, '\n'))
		if i < MaxEntries && l.Digest != "" {
			t.Fatalf("a digest at %d entries, before the list was cut", i+1)
		}
	}
	if l.Count != MaxEntries+5 || len(l.Items) != MaxEntries || l.Digest != hex.EncodeToString(full.Sum(nil)) {
		t.Fatalf("count %d, items %d, digest %s", l.Count, len(l.Items), l.Digest)
	}
	if err := l.Check("patches"); err != nil {
		t.Fatal(err)
	}
	l.Digest = ""
	if err := l.Check("patches"); err == nil {
		t.Fatal("a cut list without its digest passed")
	}
}
