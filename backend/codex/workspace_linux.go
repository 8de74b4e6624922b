//go:build linux

package codex

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openWorkspace opens the workspace at path, after the turn's wait, as the folder the view
// will bind (docs/confinement.md, "The workspace"): no symlink may be on its path (the policy
// resolved it without one, P7), and it must be the very folder checked before the wait. A
// folder swapped for a link, or for another folder, while the turn waited fails the turn
// here, before its view is made (W25).
func openWorkspace(path string, checked fs.FileInfo) (*os.File, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s is no longer the folder the policy named: a symlink is on its path now; the turn did not run", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w; the turn did not run", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	st, err := f.Stat()
	if err == nil && !os.SameFile(st, checked) {
		err = fmt.Errorf("%s is no longer the folder checked when the turn began: it was replaced while the turn waited; the turn did not run", path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// descriptorPath is where the host reads the folder f holds, whatever its path names now.
func descriptorPath(f *os.File) string {
	return "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
}
