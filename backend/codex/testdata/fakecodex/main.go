// Command fakecodex imitates the `codex` CLI (by default the pinned release, codexget.Version) closely enough for the node's tests:
// the same argument parsing (clap's messages and exit 2), the same start-up checks in the
// same order with the same messages, the prompt read from stdin, -o written and the --json
// event stream, with scenarios for the failures the runner must survive. See
// backend/codex/codextest for its switches and the Record it appends.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codexget"
)

func main() {
	if os.Getenv("FAKE_CODEX_ROLE") == "sleeper" {
		time.Sleep(time.Hour)
		return
	}
	args := os.Args[1:]
	switch {
	case len(args) == 0:
		fail(1, "Error: stdin is not a terminal")
	case args[0] == "--version" || args[0] == "-V":
		v := os.Getenv("FAKE_CODEX_VERSION")
		if v == "" {
			v = codexget.Version
		}
		fmt.Println("codex-cli " + v)
	case args[0] == "login" && len(args) == 2 && args[1] == "status":
		if os.Getenv("FAKE_CODEX_LOGGED_IN") == "1" {
			fmt.Fprintln(os.Stderr, "Logged in using ChatGPT")
			return
		}
		fail(1, "Not logged in")
	case args[0] == "exec":
		runExec(args[1:])
	default:
		fail(2, fmt.Sprintf("error: unrecognized subcommand '%s'\n\nUsage: codex [OPTIONS] [PROMPT]\n       codex [OPTIONS] <COMMAND> [ARGS]\n\nFor more information, try '--help'.", args[0]))
	}
}

func fail(code int, msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(code)
}

// option is one clap argument definition.
type option struct {
	long, short, value string // value: clap's value name, "" for a flag
	repeat             bool
	possible           []string
}

var execOptions = []option{
	{long: "config", short: "c", value: "key=value", repeat: true},
	{long: "enable", value: "FEATURE", repeat: true},
	{long: "disable", value: "FEATURE", repeat: true},
	{long: "strict-config"},
	{long: "image", short: "i", value: "FILE", repeat: true},
	{long: "model", short: "m", value: "MODEL"},
	{long: "oss"},
	{long: "local-provider", value: "OSS_PROVIDER"},
	{long: "profile", short: "p", value: "CONFIG_PROFILE_V2"},
	{long: "sandbox", short: "s", value: "SANDBOX_MODE", possible: []string{"read-only", "workspace-write", "danger-full-access"}},
	{long: "approve-for-me"},
	{long: "dangerously-bypass-approvals-and-sandbox"},
	{long: "yolo"},
	{long: "dangerously-bypass-hook-trust"},
	{long: "cd", short: "C", value: "DIR"},
	{long: "worktree"},
	{long: "add-dir", value: "DIR", repeat: true},
	{long: "thread-source", value: "SOURCE"},
	{long: "cyber-access-program", value: "PROGRAM", possible: []string{"standard", "daybreak_blue", "daybreak_red"}},
	{long: "skip-git-repo-check"},
	{long: "trust"},
	{long: "ephemeral"},
	{long: "ignore-user-config"},
	{long: "ignore-rules"},
	{long: "output-schema", value: "FILE"},
	{long: "color", value: "COLOR", possible: []string{"always", "never", "auto"}},
	{long: "json"},
	{long: "output-last-message", short: "o", value: "FILE"},
}

var resumeOptions = []option{
	{long: "config", short: "c", value: "key=value", repeat: true},
	{long: "last"},
	{long: "all"},
	{long: "enable", value: "FEATURE", repeat: true},
	{long: "disable", value: "FEATURE", repeat: true},
	{long: "image", short: "i", value: "FILE", repeat: true},
	{long: "strict-config"},
	{long: "model", short: "m", value: "MODEL"},
	{long: "dangerously-bypass-approvals-and-sandbox"},
	{long: "dangerously-bypass-hook-trust"},
	{long: "worktree"},
	{long: "thread-source", value: "SOURCE"},
	{long: "cyber-access-program", value: "PROGRAM", possible: []string{"standard", "daybreak_blue", "daybreak_red"}},
	{long: "skip-git-repo-check"},
	{long: "trust"},
	{long: "ephemeral"},
	{long: "ignore-user-config"},
	{long: "ignore-rules"},
	{long: "output-schema", value: "FILE"},
	{long: "json"},
	{long: "output-last-message", short: "o", value: "FILE"},
}

const (
	execUsage   = "Usage: codex exec [OPTIONS] [PROMPT]\n       codex exec [OPTIONS] <COMMAND> [ARGS]"
	resumeUsage = "Usage: codex exec resume [OPTIONS] [SESSION_ID] [PROMPT]"
)

// parsed holds the options by long name and the positionals of one clap level.
type parsed struct {
	opts        map[string][]string
	positionals []string
}

func (p parsed) has(name string) bool { return len(p.opts[name]) > 0 }

func (p parsed) get(name string) string {
	if v := p.opts[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// clapError prints clap's message for a bad argument and exits 2.
func clapError(usage, msg string) {
	fail(2, "error: "+msg+"\n\n"+usage+"\n\nFor more information, try '--help'.")
}

func unexpected(usage, arg string) {
	fail(2, fmt.Sprintf("error: unexpected argument '%s' found\n\n  tip: to pass '%s' as a value, use '-- %s'\n\n%s\n\nFor more information, try '--help'.", arg, arg, arg, usage))
}

// parse reads one level of arguments; at the exec level a first positional "resume" starts
// the resume subcommand, whose arguments are returned in rest.
func parse(args []string, defs []option, usage string, maxPositionals int, subcommand bool) (parsed, []string, bool) {
	p := parsed{opts: map[string][]string{}}
	onlyPositionals := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if onlyPositionals || a == "-" || !strings.HasPrefix(a, "-") {
			if subcommand && !onlyPositionals && len(p.positionals) == 0 && a == "resume" {
				return p, args[i+1:], true
			}
			if len(p.positionals) >= maxPositionals {
				unexpected(usage, a)
			}
			p.positionals = append(p.positionals, a)
			continue
		}
		if a == "--" {
			onlyPositionals = true
			continue
		}
		var def *option
		var value string
		hasValue := false
		shown := a
		if strings.HasPrefix(a, "--") {
			name, v, ok := strings.Cut(a[2:], "=")
			value, hasValue, shown = v, ok, "--"+name
			for j := range defs {
				if defs[j].long == name {
					def = &defs[j]
				}
			}
		} else {
			short := a[1:2]
			shown = "-" + short
			if len(a) > 2 {
				value, hasValue = strings.TrimPrefix(a[2:], "="), true
			}
			for j := range defs {
				if defs[j].short == short {
					def = &defs[j]
				}
			}
		}
		if def == nil {
			unexpected(usage, shown)
		}
		label := "--" + def.long
		if def.value != "" {
			label += " <" + def.value + ">"
		}
		if def.value == "" {
			if hasValue {
				clapError(usage, fmt.Sprintf("unexpected value '%s' for '%s' found; no more were expected", value, label))
			}
			value = "true"
		} else if !hasValue {
			if i+1 >= len(args) {
				fail(2, fmt.Sprintf("error: a value is required for '%s' but none was supplied%s\n\nFor more information, try '--help'.", label, possibleValues(def)))
			}
			i++
			value = args[i]
		}
		if def.possible != nil && !contains(def.possible, value) {
			fail(2, fmt.Sprintf("error: invalid value '%s' for '%s'%s\n\nFor more information, try '--help'.", value, label, possibleValues(def)))
		}
		if !def.repeat && p.has(def.long) {
			clapError(usage, fmt.Sprintf("the argument '%s' cannot be used multiple times", label))
		}
		p.opts[def.long] = append(p.opts[def.long], value)
	}
	return p, nil, false
}

func possibleValues(def *option) string {
	if def.possible == nil {
		return ""
	}
	return "\n  [possible values: " + strings.Join(def.possible, ", ") + "]"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// run is the state of one exec run.
type run struct {
	rec       codextest.Record
	outFile   *os.File
	threadID  string
	workspace string
	sessions  string
}

func runExec(args []string) {
	top, rest, resume := parse(args, execOptions, execUsage, 1, true)
	opts := top
	var prompt string
	var threadID string
	if resume {
		sub, _, _ := parse(rest, resumeOptions, resumeUsage, 2, false)
		for k, v := range sub.opts {
			opts.opts[k] = v // the subcommand's own options win
		}
		if len(sub.positionals) > 0 {
			threadID = sub.positionals[0]
		}
		if len(sub.positionals) > 1 {
			prompt = sub.positionals[1]
		}
		if threadID == "" && !sub.has("last") {
			fail(1, "Error: a session id or --last is required to resume")
		}
	} else if len(top.positionals) > 0 {
		prompt = top.positionals[0]
	}

	// Start-up checks, in codex's order: --cd, the prompt, the git check, -o, the thread.
	cwd, _ := os.Getwd()
	workspace := cwd
	if cd := opts.get("cd"); cd != "" {
		st, err := os.Stat(cd)
		if err != nil || !st.IsDir() {
			fail(1, "Error: No such file or directory (os error 2)")
		}
		workspace, _ = filepath.Abs(cd)
	}
	prompt = readPrompt(prompt)
	if !opts.has("skip-git-repo-check") && !insideGitRepo(workspace) {
		fail(1, "Not inside a trusted directory and --skip-git-repo-check was not specified.")
	}
	r := &run{workspace: workspace}
	if path := opts.get("output-last-message"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fail(1, fmt.Sprintf("Error: Failed to open last message file %q: No such file or directory (os error 2)", path))
		}
		r.outFile = f
	}
	r.sessions = filepath.Join(codexHome(), "sessions")
	if resume {
		if _, err := os.Stat(filepath.Join(r.sessions, filepath.Base(threadID))); err != nil {
			fail(1, fmt.Sprintf("Error: thread/resume: thread/resume failed: no rollout found for thread id %s (code -32600)", threadID))
		}
		r.threadID = threadID
	} else {
		r.threadID = newThreadID()
	}
	if !opts.has("ephemeral") {
		_ = os.MkdirAll(r.sessions, 0o700)
		f, err := os.OpenFile(filepath.Join(r.sessions, r.threadID), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%q\n", prompt)
			f.Close()
		}
	}

	sandbox := opts.get("sandbox")
	if sandbox == "" {
		sandbox = "read-only" // no config.toml here; a user's could say otherwise
	}
	r.rec = codextest.Record{
		Phase: "start", PID: os.Getpid(), Argv: os.Args, Cwd: cwd, Cd: opts.get("cd"),
		Sandbox: sandbox, Model: opts.get("model"), OutputFile: opts.get("output-last-message"),
		JSON: opts.has("json"), SkipGitCheck: opts.has("skip-git-repo-check"), Resume: resume,
		ThreadID: r.threadID, Config: opts.opts["config"], Prompt: prompt, Env: os.Environ(),
		Scenario: scenario(prompt),
	}
	r.play()
}

// readPrompt follows codex: "-" or no prompt reads all of stdin; a prompt argument with a
// piped stdin waits for stdin too and appends it.
func readPrompt(arg string) string {
	if arg == "" || arg == "-" {
		data, _ := io.ReadAll(os.Stdin)
		if strings.TrimSpace(string(data)) == "" {
			fail(1, "No prompt provided via stdin.")
		}
		return string(data)
	}
	if st, err := os.Stdin.Stat(); err == nil && st.Mode()&os.ModeCharDevice == 0 {
		fmt.Fprintln(os.Stderr, "Reading additional input from stdin...")
		data, _ := io.ReadAll(os.Stdin)
		if s := strings.TrimSpace(string(data)); s != "" {
			return arg + "\n\n<stdin>\n" + s + "\n</stdin>"
		}
	}
	return arg
}

func insideGitRepo(dir string) bool {
	for {
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			return true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}

func codexHome() string {
	if h := os.Getenv("CODEX_HOME"); h != "" {
		return h
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".codex")
}

func newThreadID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

var promptScenario = regexp.MustCompile(`\[fake:([a-z0-9-]+)\]`)

func scenario(prompt string) string {
	if m := promptScenario.FindStringSubmatch(prompt); m != nil {
		return m[1]
	}
	if s := os.Getenv("FAKE_CODEX_SCENARIO"); s != "" {
		return s
	}
	return codextest.ScenarioOK
}

func (r *run) record() {
	if path := os.Getenv("FAKE_CODEX_RECORD"); path != "" {
		if err := codextest.AppendRecord(path, r.rec); err != nil {
			fail(70, "fake codex: record: "+err.Error())
		}
	}
}

func (r *run) exit(code int) {
	r.rec.Phase = "end"
	r.record()
	os.Exit(code)
}

func emit(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(line, '\n'))
}

type obj = map[string]any

func (r *run) started() {
	emit(obj{"type": "thread.started", "thread_id": r.threadID})
	emit(obj{"type": "turn.started"})
}

var usage = obj{"input_tokens": 120, "cached_input_tokens": 20, "cache_write_input_tokens": 0, "output_tokens": 7, "reasoning_output_tokens": 3}

// answer ends a successful turn with text as the last message.
func (r *run) answer(text string) {
	emit(obj{"type": "item.completed", "item": obj{"id": "item_9", "type": "agent_message", "text": text}})
	emit(obj{"type": "turn.completed", "usage": usage})
	if r.outFile != nil {
		r.outFile.WriteString(text)
		r.outFile.Close()
	}
	r.exit(0)
}

func (r *run) failTurn(msg string, retries int) {
	for i := 1; i <= retries; i++ {
		emit(obj{"type": "error", "message": fmt.Sprintf("Reconnecting... %d/%d (%s)", i, retries, msg)})
	}
	emit(obj{"type": "error", "message": msg})
	emit(obj{"type": "turn.failed", "error": obj{"message": msg}})
	r.exit(1)
}

// waitGate returns when FAKE_CODEX_GATE's file appears, or its directory goes away (the test
// that set it ended).
func waitGate() {
	gate := os.Getenv("FAKE_CODEX_GATE")
	for {
		if _, err := os.Stat(gate); err == nil {
			return
		}
		if _, err := os.Stat(filepath.Dir(gate)); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func envSize(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func okAnswer() string {
	if a := os.Getenv("FAKE_CODEX_ANSWER"); a != "" {
		return a
	}
	return codextest.DefaultAnswer
}

func (r *run) play() {
	switch r.rec.Scenario {
	case codextest.ScenarioOK:
		r.record()
		r.started()
		emit(obj{"type": "item.completed", "item": obj{"id": "item_0", "type": "reasoning", "text": "**Answering**"}})
		r.answer(okAnswer())
	case codextest.ScenarioTools:
		r.record()
		r.started()
		cmd := "/bin/bash -lc 'ls'"
		emit(obj{"type": "item.started", "item": obj{"id": "item_0", "type": "command_execution", "command": cmd, "aggregated_output": "", "exit_code": nil, "status": "in_progress"}})
		emit(obj{"type": "item.completed", "item": obj{"id": "item_0", "type": "command_execution", "command": cmd, "aggregated_output": "a.txt\n", "exit_code": 0, "status": "completed"}})
		emit(obj{"type": "item.completed", "item": obj{"id": "item_1", "type": "file_change", "changes": []obj{{"path": "notes.md", "kind": "update"}}, "status": "failed"}})
		emit(obj{"type": "item.started", "item": obj{"id": "item_2", "type": "mcp_tool_call", "server": "docs", "tool": "search", "status": "in_progress"}})
		emit(obj{"type": "item.completed", "item": obj{"id": "item_3", "type": "agent_message", "text": "Looking at the files first."}})
		emit(obj{"type": "item.completed", "item": obj{"id": "item_4", "type": "todo_list", "items": []obj{{"text": "read", "completed": true}}}})
		r.answer(okAnswer())
	case codextest.Scenario401:
		r.record()
		r.started()
		r.failTurn("unexpected status 401 Unauthorized: Incorrect API key provided: sk-proj-********************abcd., url: https://api.openai.com/v1/responses", 5)
	case codextest.ScenarioQuota:
		r.record()
		r.started()
		r.failTurn("Quota exceeded. Check your plan and billing details.", 0)
	case codextest.ScenarioModel:
		r.record()
		r.started()
		r.failTurn("The requested model 'gpt-nope' does not exist.", 0)
	case codextest.ScenarioOffline:
		r.record()
		r.started()
		for {
			emit(obj{"type": "error", "message": "Reconnecting... waiting for network (Connection failed: error sending request)"})
			time.Sleep(50 * time.Millisecond)
		}
	case codextest.ScenarioHang:
		r.record()
		r.started()
		hang()
	case codextest.ScenarioIgnoreTerm:
		signal.Ignore(os.Interrupt, syscall.SIGTERM)
		r.record()
		r.started()
		hang()
	case codextest.ScenarioCrash:
		r.record()
		r.started()
		os.Stdout.WriteString(`{"type":"item.completed","item":{"id":"item_0","type":"agent_mes`)
		p, _ := os.FindProcess(os.Getpid())
		_ = p.Signal(os.Kill)
		hang()
	case codextest.ScenarioGarbage:
		r.record()
		os.Stdout.WriteString("WARNING: proceeding, even though we could not update PATH\n")
		r.started()
		os.Stdout.WriteString("not json at all\n{broken\n[1,2,3]\n\"a string\"\n\n")
		os.Stdout.WriteString(`{"type":"item.completed","item":{"id":"x","type":"agent_message","text":"cut"` + "\r\n")
		emit(obj{"type": "future.event", "payload": obj{"a": 1}})
		emit(obj{"type": "item.completed", "item": obj{"id": "item_1", "type": "hologram", "text": "not an answer"}})
		emit(obj{"type": "item.completed", "item": nil})
		emit(obj{"type": "item.updated", "item": obj{"id": "item_2", "type": "agent_message", "text": "partial"}})
		os.Stdout.WriteString(strings.Repeat("x", 300<<10) + "\n") // longer than bufio.Scanner's 64 KiB
		r.answer(okAnswer())
	case codextest.ScenarioHuge:
		r.record()
		r.started()
		r.answer(strings.Repeat("a", envSize("FAKE_CODEX_ANSWER_BYTES", 8<<20)))
	case codextest.ScenarioFlood:
		r.record()
		r.started()
		line, _ := json.Marshal(obj{"type": "item.updated", "item": obj{"id": "item_0", "type": "command_execution", "aggregated_output": strings.Repeat("y", 1<<20)}})
		line = append(line, '\n')
		for {
			if _, err := os.Stdout.Write(line); err != nil {
				os.Exit(1)
			}
		}
	case codextest.ScenarioStderrFlood:
		r.record()
		chunk := []byte(strings.Repeat("warning: flood\n", 4096))
		for n := envSize("FAKE_CODEX_STDERR_BYTES", 32<<20); n > 0; n -= len(chunk) {
			os.Stderr.Write(chunk)
		}
		r.started()
		r.answer(okAnswer())
	case codextest.ScenarioGrandchild:
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), "FAKE_CODEX_ROLE=sleeper")
		child.Stdout, child.Stderr = os.Stdout, os.Stderr // holds the pipes open
		if err := child.Start(); err != nil {
			fail(70, "fake codex: grandchild: "+err.Error())
		}
		r.rec.GrandchildPID = child.Process.Pid
		r.record()
		r.started()
		r.answer(okAnswer())
	case codextest.ScenarioWrite:
		r.record()
		r.started()
		_ = os.WriteFile(filepath.Join(r.workspace, "pwned.txt"), []byte("pwned\n"), 0o644)
		r.answer(okAnswer())
	case codextest.ScenarioEmpty:
		r.record()
		r.started()
		emit(obj{"type": "turn.completed", "usage": usage})
		r.exit(0)
	case codextest.ScenarioNoComplete:
		r.record()
		r.started()
		emit(obj{"type": "item.completed", "item": obj{"id": "item_0", "type": "agent_message", "text": okAnswer()}})
		r.exit(0)
	case codextest.ScenarioFail:
		r.record()
		fmt.Fprintln(os.Stderr, "2026-01-01T00:00:00Z ERROR codex_core: request failed: Authorization: Bearer sk-live-0123456789abcdefghij")
		fmt.Fprintln(os.Stderr, "Error: backend exploded; api_key=sk-proj-SECRETSECRETSECRET123")
		r.exit(3)
	case codextest.ScenarioGate:
		r.record()
		waitGate()
		r.started()
		r.answer(okAnswer())
	case codextest.ScenarioLate:
		r.record()
		r.started()
		cmd := "/bin/bash -lc 'make'"
		emit(obj{"type": "item.started", "item": obj{"id": "item_0", "type": "command_execution", "command": cmd, "aggregated_output": "", "exit_code": nil, "status": "in_progress"}})
		waitGate()
		r.answer(okAnswer())
	default:
		fail(70, "fake codex: unknown scenario "+r.rec.Scenario)
	}
}

// hang blocks for good; a bare select{} would be reported as a deadlock by the runtime.
func hang() {
	for {
		time.Sleep(time.Hour)
	}
}
