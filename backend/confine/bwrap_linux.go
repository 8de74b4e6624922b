package confine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// etcFiles are the parts of /etc that programs need to run, resolve names and speak TLS;
// the rest of /etc (credentials of system services, machine secrets) stays out.
var etcFiles = []string{
	"alternatives", "ca-certificates", "ca-certificates.conf", "ssl", "pki", "crypto-policies",
	"resolv.conf", "hosts", "host.conf", "nsswitch.conf", "gai.conf", "services", "protocols",
	"passwd", "group", "localtime", "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"bash.bashrc", "profile", "inputrc", "terminfo", "mime.types", "magic", "os-release",
	"debian_version", "gitconfig", "environment", "locale.alias", "locale.conf", "default/locale",
}

// topLinks are the directories of / that merged-/usr systems make symlinks into /usr.
var topLinks = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

const probeTimeout = 10 * time.Second

// rootViewID is the uid and gid a tree started by root has inside its view.
const rootViewID = "1000"

// Wrap returns the command that runs argv inside v: bwrap and its arguments. The caller
// starts it with the environment argv should get; bwrap passes it on unchanged and nothing
// secret goes on bwrap's command line, which every process of the user can read.
func (s *Sandbox) Wrap(v View, argv []string) (string, []string, error) {
	bin, err := s.binary()
	if err != nil {
		return "", nil, err
	}
	if len(argv) == 0 {
		return "", nil, errors.New("confine: nothing to run")
	}
	args := []string{
		// New user, PID, IPC, UTS and cgroup namespaces; the network stays (the coding agent
		// reaches its model; the commands it runs are cut off by its own sandbox).
		"--unshare-all", "--share-net",
		"--die-with-parent", // the kernel ends the tree when the runner's process dies
		"--new-session",     // no TIOCSTI into the node's terminal
		"--cap-drop", "ALL", // as root, bwrap would keep them: enough to remount the view read-write
	}
	if v.InfoFD > 0 {
		args = append(args, "--info-fd", strconv.Itoa(v.InfoFD))
	}
	if v.BlockFD > 0 {
		args = append(args, "--block-fd", strconv.Itoa(v.BlockFD))
	}
	if os.Geteuid() == 0 {
		// Root's uid 0 inside would make the coding agent's own sandbox (a nested bwrap)
		// take the privileged path, which needs the capabilities dropped above. Inside, the
		// tree runs as an ordinary uid that maps to root outside, as an owner's would.
		args = append(args, "--unshare-user", "--uid", rootViewID, "--gid", rootViewID)
	}
	args = append(args, systemMounts()...)
	for _, m := range v.Mounts {
		target := m.Target
		if target == "" {
			target = m.Source
		}
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(target) {
			return "", nil, fmt.Errorf("confine: mount %q → %q: paths must be absolute", m.Source, target)
		}
		flag, src := "--ro-bind", m.Source
		if m.Writable {
			flag = "--bind"
		}
		if m.FD > 0 {
			flag, src = flag+"-fd", strconv.Itoa(m.FD)
		}
		args = append(args, flag, src, target)
	}
	// Mount points exist now; nothing may add to the view's root.
	args = append(args, "--remount-ro", "/")
	dir := v.Dir
	if dir == "" {
		dir = "/"
	}
	args = append(args, "--chdir", dir, "--")
	return bin, append(args, argv...), nil
}

// systemMounts is the part of every view that lets programs run: /usr, the top-level links
// into it, the few files of /etc listed above, a fresh /proc of the view's own processes and
// a minimal /dev. Everything read-only.
func systemMounts() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range topLinks {
		p := "/" + d
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if to, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", to, p)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", p, p)
		}
	}
	for _, name := range etcFiles {
		// bwrap skips the file where the host has none; it follows links (resolv.conf often
		// points into /run) as a bind does.
		p := "/etc/" + name
		args = append(args, "--ro-bind-try", p, p)
	}
	return append(args, "--proc", "/proc", "--dev", "/dev")
}

// binary finds bubblewrap on PATH, once: a turn does not walk PATH again (a binary removed
// since fails the turn at its start, with the path in the error).
func (s *Sandbox) binary() (string, error) {
	if bin := s.found.Load(); bin != nil {
		return *bin, nil
	}
	name := s.Path
	if name == "" {
		name = "bwrap"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: bubblewrap is not installed (no %q found); install it: sudo apt install bubblewrap", ErrUnavailable, name)
	}
	s.found.Store(&bin)
	return bin, nil
}

// probe runs /usr/bin/true in an empty view, as a turn would start.
func (s *Sandbox) probe(ctx context.Context) Status {
	bin, err := s.binary()
	if err != nil {
		return Status{Reason: strings.TrimPrefix(err.Error(), ErrUnavailable.Error()+": ")}
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	version := "bubblewrap"
	vcmd := exec.CommandContext(ctx, bin, "--version")
	vcmd.WaitDelay = time.Second
	if out, err := vcmd.Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}
	probe := []string{"/usr/bin/true"}
	if s.Mark != "" {
		probe = append(probe, s.Mark)
	}
	_, args, err := s.Wrap(View{}, probe)
	if err != nil {
		return Status{Reason: err.Error()}
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stderr = &stderr
	// The view runs in a session of its own: should it outlive a killed bwrap holding the
	// stderr pipe, Run must still return (a probe that never ends hangs the Status page).
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return Status{Reason: fmt.Sprintf("%s cannot set up a sandbox here (%s); it needs unprivileged user namespaces: sysctl user.max_user_namespaces must be above 0 (and, on Ubuntu 24.04, an AppArmor profile that lets bwrap use them)", version, msg)}
	}
	return Status{Available: true, Mechanism: version}
}
