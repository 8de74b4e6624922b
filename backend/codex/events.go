package codex

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"

	"github.com/aether/aether/backend/domain"
)

// event is one line of `codex exec --json`. Fields not listed are ignored, as are unknown
// event and item types, so a newer codex that adds some keeps working.
type event struct {
	Type     string        `json:"type"`
	ThreadID string        `json:"thread_id"`
	Message  string        `json:"message"`
	Item     *item         `json:"item"`
	Usage    *domain.Usage `json:"usage"`
	Error    *errorMsg     `json:"error"`
}

type errorMsg struct {
	Message string `json:"message"`
}

type item struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Text    string `json:"text"`
	Message string `json:"message"`
	Command string `json:"command"`
	// command_execution's, once completed; file_change's status too.
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	Status           string `json:"status"`
	Changes          []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Query  string `json:"query"`
}

// transcript is what the runner keeps from the event stream.
type transcript struct {
	threadID      string
	answer        string // last completed agent_message
	usage         domain.Usage
	turnCompleted bool
	turnFailed    bool
	failMessage   string // turn.failed error
	lastError     string // last non-fatal `error` event or error item
	networkRetry  bool   // saw "waiting for network"-style retries
	events        int
	skipped       int      // lines that were not JSON objects
	work          *workLog // what the turn did, for its receipt (nil: not kept)
}

// handle folds one line into the transcript and returns a progress text ("" for none).
func (t *transcript) handle(line []byte) string {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return ""
	}
	var ev event
	if line[0] != '{' || json.Unmarshal(line, &ev) != nil {
		t.skipped++
		return ""
	}
	t.events++
	switch ev.Type {
	case "thread.started":
		if ev.ThreadID != "" {
			t.threadID = ev.ThreadID
		}
	case "turn.completed":
		t.turnCompleted = true
		if ev.Usage != nil {
			t.usage = *ev.Usage
		}
	case "turn.failed":
		t.turnFailed = true
		if ev.Error != nil {
			t.failMessage = ev.Error.Message
		}
	case "error":
		t.noteError(ev.Message)
		return ev.Message
	case "item.started", "item.updated", "item.completed":
		if ev.Item != nil {
			return t.handleItem(ev.Type, ev.Item)
		}
	}
	return ""
}

func (t *transcript) noteError(msg string) {
	t.lastError = msg
	if isNetworkRetry(msg) {
		t.networkRetry = true
	}
}

func (t *transcript) handleItem(phase string, it *item) string {
	t.work.item(phase, it)
	switch it.Type {
	case "agent_message":
		if phase == "item.completed" {
			t.answer = it.Text
		}
	case "error":
		if phase == "item.completed" {
			t.noteError(it.Message)
		}
	case "command_execution":
		if phase == "item.started" {
			return "running: " + unwrapShell(it.Command)
		}
	case "file_change":
		if phase == "item.completed" && len(it.Changes) > 0 {
			paths := make([]string, 0, len(it.Changes))
			for _, c := range it.Changes {
				paths = append(paths, c.Path)
			}
			return "editing: " + strings.Join(paths, ", ")
		}
	case "mcp_tool_call":
		if phase == "item.started" {
			return "tool: " + it.Server + "/" + it.Tool
		}
	case "web_search":
		if phase == "item.started" {
			return "searching: " + it.Query
		}
	}
	return ""
}

// shellWrapper matches how codex reports commands: /bin/bash -lc 'ls -la'.
var shellWrapper = regexp.MustCompile(`^\S*/(?:ba|z)?sh -l?c '(.*)'$`)

func unwrapShell(cmd string) string {
	if m := shellWrapper.FindStringSubmatch(cmd); m != nil && !strings.Contains(m[1], "'") {
		return m[1]
	}
	return cmd
}

func isNetworkRetry(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "waiting for network") || strings.Contains(m, "connection failed") ||
		strings.Contains(m, "error sending request") || strings.Contains(m, "stream disconnected")
}

// errOutputCap reports that the stream went over its byte budget.
var errOutputCap = errors.New("output cap reached")

// readLines calls fn for each line of r. Lines may be many MiB, so it reads with
// bufio.Reader.ReadSlice instead of a bufio.Scanner (64 KiB cap); limit bounds the total
// bytes read, and with them the longest line held in memory. A last line without a newline
// (a crash mid-line) is passed on as is.
func readLines(r io.Reader, limit int64, fn func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	var total int64
	for {
		chunk, err := br.ReadSlice('\n')
		total += int64(len(chunk))
		if total > limit {
			return errOutputCap
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 {
			fn(line)
		}
		if cap(line) > 1<<20 {
			line = nil // do not pin a huge buffer for the rest of the stream
		} else {
			line = line[:0]
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
