package codex

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/aether/aether/backend/domain"
)

// realStream is what codex 0.169.0 printed for a read-only turn with one command.
const realStream = `{"type":"thread.started","thread_id":"01a227c2-6714-7ec1-9772-97118ab22e99"}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -c 'echo pwned > pwned.txt; cat a.txt'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -c 'echo pwned > pwned.txt; cat a.txt'","aggregated_output":"/bin/bash: line 1: pwned.txt: Read-only file system\nhi\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"The file says hi."}}
{"type":"turn.completed","usage":{"input_tokens":20,"cached_input_tokens":4,"cache_write_input_tokens":1,"output_tokens":10,"reasoning_output_tokens":2}}
`

func TestTranscriptRealStream(t *testing.T) {
	var tr transcript
	var progress []string
	err := readLines(strings.NewReader(realStream), 1<<20, func(line []byte) {
		if p := tr.handle(line); p != "" {
			progress = append(progress, p)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if tr.threadID != "01a227c2-6714-7ec1-9772-97118ab22e99" || tr.answer != "The file says hi." ||
		!tr.turnCompleted || tr.turnFailed || tr.events != 6 || tr.skipped != 0 {
		t.Fatalf("transcript %+v", tr)
	}
	if diff := cmp.Diff(domain.Usage{InputTokens: 20, CachedInputTokens: 4, OutputTokens: 10}, tr.usage); diff != "" {
		t.Fatalf("usage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"running: echo pwned > pwned.txt; cat a.txt"}, progress); diff != "" {
		t.Fatalf("progress (-want +got):\n%s", diff)
	}
}

func TestTranscriptFailures(t *testing.T) {
	stream := `{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"error","message":"Reconnecting... 1/5 (unexpected status 401 Unauthorized: Incorrect API key provided: dummy., url: http://127.0.0.1:1/v1/responses)"}
{"type":"error","message":"unexpected status 401 Unauthorized: Incorrect API key provided: dummy., url: http://127.0.0.1:1/v1/responses"}
{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Incorrect API key provided: dummy., url: http://127.0.0.1:1/v1/responses"}}
`
	var tr transcript
	if err := readLines(strings.NewReader(stream), 1<<20, func(l []byte) { tr.handle(l) }); err != nil {
		t.Fatal(err)
	}
	if !tr.turnFailed || tr.turnCompleted || !strings.HasPrefix(explain(tr.failMessage), "the model refused the key (set another on the Status page): unexpected status 401") {
		t.Fatalf("transcript %+v", tr)
	}

	var off transcript
	off.handle([]byte(`{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`))
	if !off.networkRetry || off.turnFailed {
		t.Fatalf("offline transcript %+v", off)
	}

	for msg, want := range map[string]string{
		"Quota exceeded. Check your plan and billing details.":                         "quota exceeded",
		"The requested model 'x' does not exist.":                                      "model not available: The requested model 'x' does not exist.",
		"Not inside a trusted directory and --skip-git-repo-check was not specified.":  "codex does not trust the workspace: Not inside a trusted directory and --skip-git-repo-check was not specified.",
		"Error: thread/resume: thread/resume failed: no rollout found for thread id x": "the codex thread to resume was not found",
		"something else": "something else",
	} {
		if got := explain(msg); got != want {
			t.Errorf("explain(%q) = %q, want %q", msg, got, want)
		}
	}
}

func TestTranscriptIgnoresUnknown(t *testing.T) {
	var tr transcript
	for _, line := range []string{
		`not json`, `{broken`, `[1]`, `"s"`, ``, `   `,
		`{"type":"future.event","x":1}`,
		`{"type":"item.completed","item":{"type":"hologram","text":"no"}}`,
		`{"type":"item.completed","item":null}`,
		`{"type":"item.updated","item":{"type":"agent_message","text":"partial"}}`,
		`{"type":"item.completed","item":{"type":"agent_message","text":"first"}}`,
		`{"type":"item.completed","item":{"type":"agent_message","text":"last"}}`,
		`{"type":"turn.completed"}`,
	} {
		tr.handle([]byte(line))
	}
	if tr.answer != "last" || !tr.turnCompleted || tr.skipped != 4 {
		t.Fatalf("transcript %+v", tr)
	}
}

func TestReadLines(t *testing.T) {
	big := strings.Repeat("z", 3<<20)
	input := "a\r\n" + big + "\n\nlast-without-newline"
	var got []string
	err := readLines(iotest.HalfReader(strings.NewReader(input)), 16<<20, func(l []byte) {
		got = append(got, string(bytes.TrimRight(l, "\r\n")))
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0] != "a" || got[1] != big || got[2] != "" || got[3] != "last-without-newline" {
		t.Fatalf("got %d lines, first %q", len(got), got[0])
	}

	t.Run("cap", func(t *testing.T) {
		n := 0
		err := readLines(strings.NewReader(strings.Repeat("x", 2<<20)+"\n"), 1<<20, func([]byte) { n++ })
		if !errors.Is(err, errOutputCap) || n != 0 {
			t.Fatalf("err %v after %d lines", err, n)
		}
	})
}

func TestUnwrapShell(t *testing.T) {
	for in, want := range map[string]string{
		"/bin/bash -lc 'ls -la'":        "ls -la",
		"/bin/bash -c 'echo hi'":        "echo hi",
		"/usr/bin/zsh -lc 'git status'": "git status",
		"bash -lc 'x'":                  "bash -lc 'x'",
		"/bin/bash -lc 'a' 'b'":         "/bin/bash -lc 'a' 'b'",
		"rg foo":                        "rg foo",
	} {
		if got := unwrapShell(in); got != want {
			t.Errorf("unwrapShell(%q) = %q, want %q", in, got, want)
		}
	}
}
