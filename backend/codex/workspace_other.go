//go:build !linux

package codex

import (
	"fmt"
	"io/fs"
	"os"
)

// openWorkspace: without confinement on this system no turn runs (confine refuses); the
// folder is still checked to be the one checked before the turn's wait.
func openWorkspace(path string, checked fs.FileInfo) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !os.SameFile(st, checked) {
		f.Close()
		return nil, fmt.Errorf("%s is no longer the folder checked when the turn began; the turn did not run", path)
	}
	return f, nil
}

func descriptorPath(f *os.File) string { return f.Name() }
