package policy

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Load reads and checks the policy file at path; relative workspaces are relative to its folder.
// It fails closed: any problem in the file, including group- or world-writable permissions on
// Unix (P12), gives an *Error listing all of them. A file that cannot be read gives a wrapped
// os error (errors.Is(err, fs.ErrNotExist) tells a first run). It applies the zero Limits:
// the node loads with Limits.Load, so that workspaces also keep clear of its data dir.
func Load(path string) (*Policy, error) { return load(path, Limits{}) }

func load(path string, lim Limits) (*Policy, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", path, err)
	}
	fail := func(msg string) (*Policy, error) {
		return nil, &Error{File: path, Problems: []Problem{{Message: msg}}}
	}
	if !fi.Mode().IsRegular() {
		return fail("is not a regular file")
	}
	if fi.Size() > MaxSize {
		return fail(fmt.Sprintf("is %d bytes; a policy may be at most %d bytes (1 MiB)", fi.Size(), MaxSize))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", path, err)
	}
	return parse(data, filepath.Dir(abs), path, abs, lim, permissionProblems(path, fi))
}

// Parse checks policy data as if it were a file in baseDir. It reports problems like Load,
// except for file permissions and, as it knows no file, a policy file reached through a symlink.
func Parse(data []byte, baseDir string) (*Policy, error) {
	return parse(data, baseDir, "", "", Limits{}, nil)
}

// parse checks data as the file named file in messages; policyFile is its absolute path ("" for
// none), lim what Load was given.
func parse(data []byte, baseDir, file, policyFile string, lim Limits, problems []Problem) (*Policy, error) {
	if len(data) > MaxSize {
		problems = append(problems, Problem{Message: fmt.Sprintf("is larger than %d bytes (1 MiB), the most a policy may be", MaxSize)})
		return nil, &Error{File: file, Problems: problems}
	}
	root, syntax := parseJSON(data)
	problems = append(problems, syntax...)
	if root == nil {
		return nil, &Error{File: file, Problems: problems}
	}
	var d decoder
	p := d.decodeDocument(data, root)
	problems = append(problems, d.problems...)
	c := newChecker(baseDir, d.reported, resolveBounds(lim, policyFile))
	c.policy(p)
	problems = append(problems, c.problems...)
	if len(problems) > 0 {
		return nil, &Error{File: file, Problems: problems}
	}
	if p.Pact != nil {
		for i := range p.Pact.Brands {
			p.Pact.Brands[i].WorkspaceDir = c.dirs[i]
		}
	}
	abs, err := filepath.Abs(baseDir)
	if err != nil {
		return nil, fmt.Errorf("policy folder %s: %w", baseDir, err)
	}
	p.BaseDir = abs
	p.limits, p.file = lim, policyFile
	return p, nil
}
