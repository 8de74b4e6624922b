package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aether/aether/backend/fsutil"
)

// Save writes p to path atomically (temp file in the same folder, fsync, rename, fsync of the
// folder), so a crash leaves the old file or the new one. It checks p first, relative to path's
// folder, as the policy file at path and by the Limits p was loaded with, and writes nothing
// when p is invalid (the *Error names the same paths as Load).
//
// Only "pact" and "scopes" are written from p. Every other top-level section is copied byte for
// byte, in its place, from the file currently at path (or, when there is none, from the file p
// was loaded from). If the file on disk cannot be parsed, Save refuses rather than lose them.
// A new file gets mode 0600; an existing one keeps its mode, minus group and other write (P12).
// Save follows a symlink at path and replaces its target.
func Save(path string, p *Policy) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("save policy %s: %w", path, err)
	}
	var lim Limits
	if p != nil {
		lim = p.limits
	}
	if err := validate(p, filepath.Dir(abs), abs, lim); err != nil {
		err.(*Error).File = path
		return err
	}
	target := abs
	if fi, err := os.Lstat(abs); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if target, err = filepath.EvalSymlinks(abs); err != nil {
			return fmt.Errorf("save policy %s: %w", path, err)
		}
	}
	sections, perm, err := currentSections(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		sections, perm = p.sections, 0o600
	case err != nil:
		return fmt.Errorf("save policy %s: %w", path, err)
	}
	out, err := render(sections, p)
	if err != nil {
		return fmt.Errorf("save policy %s: %w", path, err)
	}
	if len(out) > MaxSize {
		return fmt.Errorf("save policy %s: the result would be %d bytes, more than the %d a policy may have", path, len(out), MaxSize)
	}
	if err := fsutil.WriteFileAtomic(target, out, perm&^0o022); err != nil {
		return fmt.Errorf("save policy %s: %w", path, err)
	}
	return nil
}

// currentSections reads the top-level sections and permissions of the file at path.
func currentSections(path string) ([]section, fs.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, 0, err
	}
	keep := func(problems []Problem) error {
		return fmt.Errorf("the file on disk has problems, so its other sections cannot be kept safely; fix it by hand first:\n%w", &Error{File: path, Problems: problems})
	}
	if len(data) > MaxSize {
		return nil, 0, keep([]Problem{{Message: fmt.Sprintf("is larger than %d bytes", MaxSize)}})
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fi.Mode().Perm(), nil // nothing to keep
	}
	root, problems := parseJSON(data)
	if len(problems) > 0 {
		return nil, 0, keep(problems)
	}
	if root.kind != kindObject {
		return nil, 0, keep([]Problem{{Message: "is not a JSON object"}})
	}
	return sectionsOf(data, root), fi.Mode().Perm(), nil
}

// render writes the top-level object: sections in their order with pact and scopes replaced
// by p's, then pact and scopes if the file had none.
func render(sections []section, p *Policy) ([]byte, error) {
	var pactJSON, scopesJSON []byte
	var err error
	if p.Pact != nil {
		pc := *p.Pact
		if pc.Brands == nil {
			pc.Brands = []Brand{}
		}
		if pactJSON, err = encodeIndented(pc); err != nil {
			return nil, err
		}
	}
	scopes := p.Scopes
	if scopes == nil {
		scopes = []Scope{}
	}
	if scopesJSON, err = encodeIndented(scopes); err != nil {
		return nil, err
	}

	var b bytes.Buffer
	b.WriteString("{")
	n := 0
	member := func(rawKey, value []byte) {
		if n > 0 {
			b.WriteString(",")
		}
		n++
		b.WriteString("\n  ")
		b.Write(rawKey)
		b.WriteString(": ")
		b.Write(value)
	}
	var hadPact, hadScopes bool
	for _, s := range sections {
		switch s.key {
		case "pact":
			if !hadPact && pactJSON != nil {
				member(s.rawKey, pactJSON)
			}
			hadPact = true
		case "scopes":
			if !hadScopes {
				member(s.rawKey, scopesJSON)
			}
			hadScopes = true
		default:
			member(s.rawKey, s.raw)
		}
	}
	if !hadPact && pactJSON != nil {
		member([]byte(`"pact"`), pactJSON)
	}
	if !hadScopes && len(p.Scopes) > 0 {
		member([]byte(`"scopes"`), scopesJSON)
	}
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}

// encodeIndented marshals v as it appears one level deep in the file, keeping <, > and & as is.
func encodeIndented(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("  ", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode policy: %w", err)
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
