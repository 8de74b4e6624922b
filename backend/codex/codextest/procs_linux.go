package codextest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// Processes lists the live processes (zombies left out) whose environment holds marker, such
// as a test's FAKE_CODEX_RECORD path: the confining bwrap, the fake codex and whatever it
// left behind all carry it. PIDs inside a turn's sandbox mean nothing on the host, so this is
// how a test sees, from outside, whether a turn's processes are gone.
func Processes(marker string) []int {
	var pids []int
	entries, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range entries {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !bytes.Contains(env, []byte(marker)) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if i := bytes.LastIndexByte(stat, ')'); err != nil || i < 0 || len(stat) < i+3 || stat[i+2] == 'Z' || stat[i+2] == 'X' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}
