package codex

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aether/aether/backend/internal/fuzzseed"
)

// fuzzSecret stands for the API key handed to codex: a value no credential pattern matches,
// so only the redactor's literal catches it.
const fuzzSecret = "Quux4Zebra9Walrus"

func eventSeeds() []fuzzseed.Seed {
	s := func(name, stream string, limit int64) fuzzseed.Seed { return fuzzseed.S(name, []byte(stream), limit) }
	const mib = 1 << 20
	return []fuzzseed.Seed{
		s("valid-real-stream", realStream, mib),
		s("valid-tools", `{"type":"thread.started","thread_id":"t1"}
{"type":"item.started","item":{"type":"mcp_tool_call","server":"docs","tool":"search"}}
{"type":"item.started","item":{"type":"web_search","query":"go fuzzing"}}
{"type":"item.completed","item":{"type":"file_change","changes":[{"path":"a.go","kind":"update"},{"path":"b.go","kind":"add"}]}}
{"type":"item.completed","item":{"type":"agent_message","text":"Done."}}
{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":2}}
`, mib),
		s("s4-turn-failed", `{"type":"error","message":"stream disconnected before completion"}
{"type":"item.completed","item":{"type":"error","message":"waiting for network"}}
{"type":"turn.failed","error":{"message":"unexpected status 401"}}
`, mib),
		s("s3-over-the-cap", realStream, 100),
		s("s3-no-final-newline", strings.TrimSuffix(realStream, "\n"), mib),
		s("s10-escapes-bidi-html", `{"type":"item.started","item":{"type":"command_execution","command":"/bin/bash -lc 'echo \u001b[31mred\u001b[0m \u202eevil <b>x</b>'"}}`+"\n", mib),
		s("secret-in-command", `{"type":"item.started","item":{"type":"command_execution","command":"curl -H 'x: `+fuzzSecret+`' https://example.com"}}`+"\n", mib),
		s("secret-in-error", `{"type":"error","message":"bad key `+fuzzSecret+`"}`+"\n", mib),
		s("secret-after-long-text", `{"type":"error","message":"`+strings.Repeat("\u00e9", 790)+fuzzSecret+`"}`+"\n", mib),
		s("duplicate-keys", `{"type":"turn.completed","type":"turn.failed","error":{"message":"x"}}`+"\n", mib),
		s("case-variant-keys", `{"Type":"item.completed","item":{"TYPE":"agent_message","text":"a","Text":"b"}}`+"\n", mib),
		s("huge-numbers", `{"type":"turn.completed","usage":{"input_tokens":1e400,"output_tokens":99999999999999999999}}`+"\n", mib),
		s("deep-nesting", `{"type":"x","item":`+strings.Repeat("[", 200)+strings.Repeat("]", 200)+`}`+"\n", mib),
		s("invalid-utf8", "{\"type\":\"error\",\"message\":\"bad \xff\xfe byte\"}\n\xff\n", mib),
		s("nul", "{\"type\":\"error\",\"message\":\"a\\u0000b\"}\n\x00\x00\n", mib),
		s("truncated", realStream[:200], mib),
		s("not-json", "Reading prompt from stdin...\n[2026-03-01] warn: x\n\n   \n", mib),
		s("crlf", strings.ReplaceAll(realStream, "\n", "\r\n"), mib),
	}
}

// FuzzCodexEvents feeds a `codex exec --json` stream through readLines, the transcript and the
// progress gate, as the runner does (docs/threats.md, S3, S10). readLines passes on exactly the
// stream's lines until the byte cap, then stops with errOutputCap; the transcript counts every
// non-blank line once and keeps nothing longer than a line; each progress text is one short
// line without control or bidi characters, and never shows the API key.
func FuzzCodexEvents(f *testing.F) {
	fuzzseed.Write(f, eventSeeds())
	red := newRedactor([]string{"CODEX_API_KEY=" + fuzzSecret})
	f.Fuzz(func(t *testing.T, data []byte, limit int64) {
		if limit <= 0 || limit > 1<<20 {
			limit = 1 << 20
		}
		var tr transcript
		var lines [][]byte
		var progress []string
		clock := time.Unix(1_800_000_000, 0)
		gate := progressGate{fn: func(p Progress) { progress = append(progress, p.Text) }, red: red,
			now: func() time.Time { clock = clock.Add(time.Second); return clock }}
		err := readLines(bytes.NewReader(data), limit, func(line []byte) {
			lines = append(lines, bytes.Clone(line))
			gate.emit(tr.handle(line))
		})

		read := bytes.Join(lines, nil)
		switch {
		case int64(len(data)) > limit:
			if !errors.Is(err, errOutputCap) || int64(len(read)) > limit || !bytes.HasPrefix(data, read) {
				t.Fatalf("over the cap: err %v, %d of %d bytes passed on", err, len(read), len(data))
			}
		case err != nil || !bytes.Equal(read, data):
			t.Fatalf("err %v; the lines passed on are not the stream", err)
		}
		nonBlank := 0
		longest := 0
		for i, l := range lines {
			if len(l) == 0 || (bytes.IndexByte(l, '\n') >= 0 && bytes.IndexByte(l, '\n') != len(l)-1) ||
				(i < len(lines)-1 && l[len(l)-1] != '\n') {
				t.Fatalf("line %d is not one line: %q", i, l)
			}
			if len(bytes.TrimSpace(l)) > 0 {
				nonBlank++
			}
			longest = max(longest, len(l))
		}
		if tr.events+tr.skipped != nonBlank {
			t.Fatalf("%d events and %d skipped lines of %d non-blank lines", tr.events, tr.skipped, nonBlank)
		}
		for _, kept := range []string{tr.threadID, tr.answer, tr.failMessage, tr.lastError} {
			if len(kept) > 3*longest { // a line's invalid bytes may come back as U+FFFD
				t.Fatalf("kept %d bytes from lines of at most %d", len(kept), longest)
			}
		}
		for _, p := range progress {
			if p == "" || utf8.RuneCountInString(p) > maxProgressRunes+1 || strings.ContainsFunc(p, unsafeRune) {
				t.Fatalf("progress %q is not one short clean line", p)
			}
			if strings.Contains(p, fuzzSecret) {
				t.Fatalf("progress %q shows the API key", p)
			}
		}
	})
}
