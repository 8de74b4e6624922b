//go:build linux

package codex

import (
	"io/fs"
	"strconv"
	"syscall"
	"time"
)

// changeStamp is what of info no change to the entry leaves as it was: its inode, and its
// change time (ctime), which every write, chmod, chown, link, rename or utimes sets to the
// present and which user space cannot set back.
func changeStamp(info fs.FileInfo) (stamp string, ctime time.Time, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return "", time.Time{}, false
	}
	ctime = time.Unix(st.Ctim.Unix())
	return "ino " + strconv.FormatUint(st.Ino, 10) + " ctime " + strconv.FormatInt(ctime.UnixNano(), 10), ctime, true
}
