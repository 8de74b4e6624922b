//go:build unix

package datadir

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockWait is how long a start waits for the lock: a child forked just before the last node
// closed its lock file holds the lock until it execs (the file is close-on-exec), which on a
// loaded machine can take a moment.
const lockWait = 2 * time.Second

// lock takes an exclusive advisory lock that the kernel drops when the
// process dies, so a kill -9 never leaves a stale lock behind.
func lock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for deadline := time.Now().Add(lockWait); ; time.Sleep(50 * time.Millisecond) {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EWOULDBLOCK || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, fmt.Errorf("%w (%s is locked)", ErrLocked, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return f, nil
}
