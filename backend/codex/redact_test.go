package codex

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	r := newRedactor([]string{"CODEX_API_KEY=my-literal-key-value"})
	for in, want := range map[string]string{
		"Authorization: Bearer abcdefghijklmnop":                 "Authorization: [redacted]",
		"key sk-proj-abcdefghijklmnopqrstuvwx failed":            "key [redacted] failed",
		"api_key=supersecretvalue; next":                         "api_key=[redacted]; next",
		`{"access_token": "abc.def.ghi-long"}`:                   `{"access_token": "[redacted]"}`,
		"jwt eyJhbGciOi.eyJzdWIiOiJ4In0.sig ok":                  "jwt [redacted] ok",
		"echoed my-literal-key-value here":                       "echoed [redacted] here",
		"blob Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdI end":      "blob [redacted] end",
		"/work/main/backend/codex/testdata/fakecodex/main.go:49": "/work/main/backend/codex/testdata/fakecodex/main.go:49",
		"Reconnecting... waiting for network":                    "Reconnecting... waiting for network",
	} {
		if got := r.redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 16}
	for range 100 {
		tb.Write([]byte("line one\n"))
	}
	tb.Write([]byte("the end\n"))
	got := tb.String()
	if len(got) > 16 || !strings.HasSuffix(got, "the end\n") || strings.HasPrefix(got, "ne") {
		t.Fatalf("tail %q", got)
	}
	small := &tailBuffer{max: 16}
	small.Write([]byte("short"))
	if small.String() != "short" {
		t.Fatalf("tail %q", small.String())
	}
}

func TestCleanText(t *testing.T) {
	if got := cleanLines("a\x1b[31mred\x1b[0m\tb\nc\u202ed\x00"); got != "ared\tb\ncd" {
		t.Fatalf("cleanLines = %q", got)
	}
	if got := oneLine("  a \n\n b\x07 ", 10); got != "a b" {
		t.Fatalf("oneLine = %q", got)
	}
	if got := oneLine(strings.Repeat("é", 20), 5); got != "ééééé…" {
		t.Fatalf("oneLine = %q", got)
	}
}
