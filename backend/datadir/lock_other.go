//go:build !unix

package datadir

import (
	"fmt"
	"os"
)

// lock holds the lock file open exclusively; Windows refuses a second
// opener while the first process lives and releases it when it dies.
func lock(path string) (*os.File, error) {
	os.Remove(path) // succeeds only when no live process holds it
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w (%s: %v)", ErrLocked, path, err)
	}
	return f, nil
}
