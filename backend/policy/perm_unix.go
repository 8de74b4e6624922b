//go:build unix

package policy

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// permissionProblems refuses a policy file other OS users can change (P12): writable by group
// or others, or owned by someone other than this user or root.
func permissionProblems(path string, fi fs.FileInfo) []Problem {
	var out []Problem
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		out = append(out, Problem{Message: fmt.Sprintf("is writable by other users (mode %04o); run: chmod go-w %s", perm, path)})
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := int(st.Uid); uid != os.Geteuid() && uid != 0 {
			out = append(out, Problem{Message: fmt.Sprintf("is owned by uid %d, not by this user (uid %d), so someone else can change it; run: chown %d %s, or use a copy of your own", uid, os.Geteuid(), os.Geteuid(), path)})
		}
	}
	return out
}
