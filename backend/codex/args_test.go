package codex

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckExtraArgs(t *testing.T) {
	ok := [][]string{
		nil,
		{"-c", "model_provider=mock", "-c", `model_providers.mock={name="mock",base_url="http://127.0.0.1:1/v1",wire_api="responses"}`},
		{"--config=model_reasoning_effort=low", "-cmodel=x"},
		{"--ephemeral", "--ignore-user-config", "--ignore-rules", "--strict-config"},
		{"--enable", "web_search", "--disable=foo"},
	}
	for _, args := range ok {
		if err := checkExtraArgs(args); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
	bad := map[string][]string{
		"bypass":           {"--dangerously-bypass-approvals-and-sandbox"},
		"yolo":             {"--yolo"},
		"add-dir":          {"--add-dir", "/"},
		"add-dir=":         {"--add-dir=/"},
		"trust":            {"--trust"},
		"worktree":         {"--worktree"},
		"approval":         {"-a", "never"},
		"full-auto":        {"--full-auto"},
		"sandbox":          {"--sandbox", "danger-full-access"},
		"sandbox short":    {"-sdanger-full-access"},
		"cd":               {"-C", "/"},
		"profile":          {"-p", "x"},
		"output":           {"-o", "/tmp/x"},
		"unknown":          {"--remote", "x"},
		"positional":       {"resume"},
		"double dash":      {"--"},
		"missing value":    {"-c"},
		"value on flag":    {"--ephemeral=1"},
		"sandbox config":   {"-c", "sandbox_mode=danger-full-access"},
		"sandbox nested":   {"-c", "sandbox_workspace_write.writable_roots=[\"/\"]"},
		"quoted key":       {"-c", `"sandbox_mode"="danger-full-access"`},
		"approval config":  {"--config", "approval_policy=on-request"},
		"env policy":       {"-c", "shell_environment_policy.inherit=all"},
		"projects trust":   {"-c", `projects."/".trust_level="trusted"`},
		"mcp":              {"-c", "mcp_servers.x.command=sh"},
		"notify":           {"-c", `notify=["sh"]`},
		"no equals":        {"-c", "model"},
		"W21 project docs": {"-c", "project_doc_max_bytes=65536"},
		"W21 doc names":    {"-c", `project_doc_fallback_filenames=["README.md"]`},
		"W22 skills":       {"-c", "skills.include_instructions=true"},
	}
	for name, args := range bad {
		if err := checkExtraArgs(args); !errors.Is(err, ErrUnsafeArgs) {
			t.Errorf("%s %q: err %v", name, args, err)
		}
	}
	err := checkExtraArgs([]string{"--dangerously-bypass-approvals-and-sandbox"})
	if !strings.Contains(err.Error(), "disables the sandbox") {
		t.Errorf("message %q does not say why", err)
	}
}
