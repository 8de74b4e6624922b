package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aether/aether/backend/codex/codextest"
)

// nodeProc is `aether node serve` running as a child process on one data dir. Each start is a
// new process: its node API port and admin port are read back from node.json.
type nodeProc struct {
	bin, dataDir, policy, listen, codex, log string
	env                                      []string
	marker                                   string // in the environment of every process of its turns

	cmd  *exec.Cmd
	done chan error
	api  string // node API address of the running process
	tok  string // admin token
}

// start spawns the node without waiting for it.
func (n *nodeProc) start() error {
	logf, err := os.OpenFile(n.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(n.bin, "node", "serve", "--policy", n.policy, "--data-dir", n.dataDir,
		"--port", "0", "--admin-port", "0", "--pact-listen", n.listen, "--codex", n.codex)
	cmd.Env = append(os.Environ(), n.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start aether node serve: %w", err)
	}
	n.cmd, n.done, n.api = cmd, make(chan error, 1), ""
	go func() { n.done <- cmd.Wait() }()
	return nil
}

// ready waits until this process has written node.json and its gateway answers /healthz.
func (n *nodeProc) ready(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-n.done:
			n.cmd = nil
			return fmt.Errorf("aether node serve exited: %v (log: %s)", err, n.log)
		case <-time.After(5 * time.Millisecond):
		}
		var addrs struct {
			API string `json:"api"`
			PID int    `json:"pid"`
		}
		data, err := os.ReadFile(filepath.Join(n.dataDir, "node.json"))
		if err != nil || json.Unmarshal(data, &addrs) != nil || addrs.PID != n.cmd.Process.Pid {
			continue // not written yet, or the killed node's
		}
		resp, err := http.Get("http://" + n.listen + "/healthz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			continue
		}
		tok, err := os.ReadFile(filepath.Join(n.dataDir, "admin.token"))
		if err != nil {
			return err
		}
		n.api, n.tok = addrs.API, strings.TrimSpace(string(tok))
		return nil
	}
	return fmt.Errorf("aether node serve was not ready within %s (log: %s)", limit, n.log)
}

// kill9 kills the node with SIGKILL: no shutdown code runs.
func (n *nodeProc) kill9() error {
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-n.done
	n.cmd = nil
	return nil
}

// stop asks the node to stop (SIGTERM) and wants a clean exit.
func (n *nodeProc) stop() error {
	if n.cmd == nil {
		return nil
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-n.done:
		n.cmd = nil
		return err
	case <-time.After(30 * time.Second):
		n.cmd.Process.Kill()
		<-n.done
		n.cmd = nil
		return errors.New("did not stop within 30s of SIGTERM")
	}
}

// orphans waits up to a second for the processes of the node's turns to be gone once the node
// is (the kernel kills them with it: docs/threats.md, T8), then kills and returns those left.
func (n *nodeProc) orphans() []string { return killAll(pidsOf(still(n.turnProcs()))) }

// proc is one process: its PID and start time, which a reused PID does not share.
type proc struct {
	pid   int
	start string
}

// turnProcs are the processes of the node's turns running now.
func (n *nodeProc) turnProcs() []proc {
	var out []proc
	for _, pid := range codextest.Processes(n.marker) {
		if p, ok := running(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// running reads pid's start time; ok is false once it has ended.
func running(pid int) (proc, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(string(stat), ')')
	if err != nil || i < 0 {
		return proc{}, false
	}
	f := strings.Fields(string(stat[i+1:])) // state ppid … starttime is the 20th
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return proc{}, false
	}
	return proc{pid, f[19]}, true
}

// still waits up to a second for ps to end and returns those that run on.
func still(ps []proc) []proc {
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		var left []proc
		for _, p := range ps {
			if now, ok := running(p.pid); ok && now == p {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		ps = left
	}
}

func pidsOf(ps []proc) []int {
	pids := make([]int, len(ps))
	for i, p := range ps {
		pids[i] = p.pid
	}
	return pids
}

// strays kills and returns the processes of the running node's turns that no longer descend
// from it: their parent is init, which adopted them when the process that started them died.
func (n *nodeProc) strays() []string {
	var pids []int
	for _, pid := range codextest.Processes(n.marker) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := strings.LastIndexByte(string(stat), ')'); err == nil && i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 && f[1] == "1" {
				pids = append(pids, pid)
			}
		}
	}
	return killAll(pids)
}

func killAll(pids []int) []string {
	var killed []string
	for _, pid := range pids {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		argv := strings.Split(string(cmdline), "\x00")
		syscall.Kill(pid, syscall.SIGKILL)
		killed = append(killed, fmt.Sprintf("%d(%s)", pid, filepath.Base(argv[0])))
	}
	return killed
}

// rssMB is the node process's resident set (VmRSS), in MB.
func (n *nodeProc) rssMB() (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/<pid>/status")
}

// runtimeStats is GET /v1/runtime of the node API (docs/admin-api.md).
type runtimeStats struct {
	Goroutines int    `json:"goroutines"`
	HeapBytes  uint64 `json:"heapBytes"`
}

// metricsClient keeps no connection open between reads, so reading does not add to what it reads.
var metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func (n *nodeProc) runtime() (runtimeStats, error) {
	var rt runtimeStats
	req, _ := http.NewRequest("GET", "http://"+n.api+"/v1/runtime", nil)
	req.Header.Set("Authorization", "Bearer "+n.tok)
	resp, err := metricsClient.Do(req)
	if err != nil {
		return rt, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rt, fmt.Errorf("GET /v1/runtime: %s", resp.Status)
	}
	return rt, json.NewDecoder(resp.Body).Decode(&rt)
}

// sample is the node's footprint at one moment.
type sample struct {
	rssMB      float64
	goroutines int
	heapMB     float64
}

func (s sample) String() string {
	return fmt.Sprintf("rss %.1f MB, heap %.1f MB, %d goroutines", s.rssMB, s.heapMB, s.goroutines)
}

// settled samples the node once its goroutine count has stopped moving (three equal reads in a
// row, or the last read after 10 s): connections that just closed take a moment to unwind.
func (n *nodeProc) settled() (sample, error) {
	var last, same int
	deadline := time.Now().Add(10 * time.Second)
	for {
		rt, err := n.runtime()
		if err != nil {
			return sample{}, err
		}
		if rt.Goroutines == last {
			same++
		} else {
			last, same = rt.Goroutines, 1
		}
		if same == 3 || time.Now().After(deadline) {
			rss, err := n.rssMB()
			return sample{rssMB: rss, goroutines: rt.Goroutines, heapMB: float64(rt.HeapBytes) / (1 << 20)}, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}
