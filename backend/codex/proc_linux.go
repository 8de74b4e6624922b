//go:build linux

package codex

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// dieWithParent has the kernel SIGKILL codex if the node dies (kill -9 included),
// so no turn outlives it. The signal is tied to the thread that started codex:
// runProcess keeps that thread locked until codex has exited.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// lockThread pins the starting goroutine to its thread for dieWithParent.
func lockThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// liveInGroup scans /proc for a process of group pgid that is not a zombie.
func liveInGroup(pgid int) (alive, ok bool) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return false, false
	}
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp …; comm may contain spaces and parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(data[i+1:])
		if len(fields) < 3 || string(fields[0]) == "Z" || string(fields[0]) == "X" {
			continue
		}
		if g, err := strconv.Atoi(string(fields[2])); err == nil && g == pgid {
			return true, true
		}
	}
	return false, true
}

// processesWith lists the processes whose command line match accepts. A process that ends
// meanwhile is left out.
func processesWith(match func(argv []string) bool) []*os.Process {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []*os.Process
	for _, path := range cmdlines {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil || len(data) == 0 {
			continue
		}
		if match(strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")) {
			if p, err := os.FindProcess(pid); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}
