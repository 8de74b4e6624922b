//go:build linux

package codexget

import (
	"io/fs"
	"syscall"
	"time"
)

func idOf(st fs.FileInfo) fileID {
	id := fileID{size: st.Size(), mtime: st.ModTime()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = sys.Dev, sys.Ino
		id.ctime = time.Unix(sys.Ctim.Sec, sys.Ctim.Nsec)
	}
	return id
}
