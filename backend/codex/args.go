package codex

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/aether/aether/backend/domain"
)

// extraOption describes an option that Runner.ExtraArgs may carry.
type extraOption struct {
	takesValue bool
	check      func(value string) error
}

// allowedExtra is an allow-list: anything else in ExtraArgs is refused, because a new codex
// release can add options that widen what the model may do.
var allowedExtra = map[string]extraOption{
	"-c":                   {takesValue: true, check: checkConfigOverride},
	"--config":             {takesValue: true, check: checkConfigOverride},
	"--enable":             {takesValue: true},
	"--disable":            {takesValue: true},
	"--ephemeral":          {},
	"--ignore-user-config": {},
	"--ignore-rules":       {},
	"--strict-config":      {},
}

// refusedExtra explains why well-known options are refused.
var refusedExtra = map[string]string{
	"--dangerously-bypass-approvals-and-sandbox": "disables the sandbox",
	"--yolo":                          "disables the sandbox",
	"--dangerously-bypass-hook-trust": "runs untrusted hooks",
	"--add-dir":                       "widens the writable area",
	"--trust":                         "persists trust for the workspace",
	"--worktree":                      "runs outside the brand's workspace",
	"--approve-for-me":                "changes the approval policy",
	"-a":                              "changes the approval policy",
	"--ask-for-approval":              "changes the approval policy",
	"--full-auto":                     "changes the sandbox",
	"-s":                              "the sandbox comes from the brand's access mode",
	"--sandbox":                       "the sandbox comes from the brand's access mode",
	"-C":                              "the working root is the brand's workspace",
	"--cd":                            "the working root is the brand's workspace",
	"-p":                              "a profile can change the sandbox settings",
	"--profile":                       "a profile can change the sandbox settings",
	"-m":                              "set the model in the request",
	"--model":                         "set the model in the request",
	"-o":                              "the runner owns the output file",
	"--output-last-message":           "the runner owns the output file",
	"--json":                          "the runner sets the output format",
	"--color":                         "the runner sets the output format",
	"--skip-git-repo-check":           "the runner sets it",
}

// noWorkspaceInstructions keep codex itself from reading instructions out of the workspace:
// no project docs (AGENTS.md, AGENTS.override.md, the fallback names) and no skills listed
// from .codex/skills or .agents/skills. Codex reads those files outside its command sandbox,
// so a file a turn wrote, or a symlink it made to /proc/self/environ, would reach the model
// as instructions (W21, W22).
var noWorkspaceInstructions = []string{
	"-c", "project_doc_max_bytes=0",
	"-c", "project_doc_fallback_filenames=[]",
	"-c", "skills.include_instructions=false",
}

// refusedConfigKeys are config.toml keys (first path segment, or prefix where marked) that
// would loosen the sandbox, the approval policy or what runs outside the sandbox, or let
// codex read instructions out of the workspace again.
var refusedConfigKeys = []string{
	"sandbox*", "approval*", "approvals_reviewer", "default_permissions", "permissions",
	"shell_environment_policy", "projects", "mcp_servers", "hooks", "notify",
	"profile", "profiles", "project_doc*", "skills",
}

// checkExtraArgs validates Runner.ExtraArgs against the allow-list.
func checkExtraArgs(args []string) error {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" || !strings.HasPrefix(arg, "-") || arg == "-" {
			return fmt.Errorf("%w: extra argument %q is not an option", ErrUnsafeArgs, arg)
		}
		name, value, attached := arg, "", false
		switch {
		case strings.HasPrefix(arg, "--"):
			name, value, attached = strings.Cut(arg, "=")
		case len(arg) > 2:
			name, value, attached = arg[:2], strings.TrimPrefix(arg[2:], "="), true
		}
		if why, bad := refusedExtra[name]; bad {
			return fmt.Errorf("%w: %s is not allowed (%s)", ErrUnsafeArgs, name, why)
		}
		opt, ok := allowedExtra[name]
		if !ok {
			return fmt.Errorf("%w: %s is not an allowed codex option", ErrUnsafeArgs, name)
		}
		if !opt.takesValue {
			if attached {
				return fmt.Errorf("%w: %s takes no value", ErrUnsafeArgs, name)
			}
			continue
		}
		if !attached {
			if i+1 >= len(args) {
				return fmt.Errorf("%w: %s needs a value", ErrUnsafeArgs, name)
			}
			i++
			value = args[i]
		}
		if opt.check != nil {
			if err := opt.check(value); err != nil {
				return fmt.Errorf("%w: %s %q: %v", ErrUnsafeArgs, name, value, err)
			}
		}
	}
	return nil
}

func checkConfigOverride(kv string) error {
	key, _, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("want key=value")
	}
	// Quotes in a dotted TOML key do not change which setting it names.
	key = strings.ToLower(strings.NewReplacer(`"`, "", `'`, "", " ", "", "\t", "").Replace(key))
	first, _, _ := strings.Cut(key, ".")
	for _, refused := range refusedConfigKeys {
		if prefix, ok := strings.CutSuffix(refused, "*"); ok {
			if strings.HasPrefix(first, prefix) {
				return fmt.Errorf("setting %s is not allowed", first)
			}
		} else if first == refused {
			return fmt.Errorf("setting %s is not allowed", first)
		}
	}
	return nil
}

// threadIDPattern admits codex thread ids (UUIDs) and thread names; never a leading '-'.
var threadIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

func checkModel(model string) error {
	if len(model) > 200 || strings.HasPrefix(model, "-") {
		return fmt.Errorf("bad model name %q", model)
	}
	for _, r := range model {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("bad model name %q", model)
		}
	}
	return nil
}

// sandboxFor maps a brand's access mode to codex's --sandbox value.
func sandboxFor(access domain.AccessMode) (string, error) {
	switch access {
	case domain.ReadOnly:
		return "read-only", nil
	case domain.ReadWrite:
		return "workspace-write", nil
	}
	return "", fmt.Errorf("unknown access mode %q", access)
}

// buildArgs assembles the codex exec command line. Options must precede `resume`: codex
// rejects -s/-C after it (exit 2). The prompt is always "-" (stdin) so no agent text can
// become an argument.
func buildArgs(req Request, outFile string, extra []string) ([]string, error) {
	sandbox, err := sandboxFor(req.AccessMode)
	if err != nil {
		return nil, err
	}
	args := []string{"exec", "--json", "--color", "never", "--sandbox", sandbox,
		"--cd", req.Workspace, "--skip-git-repo-check",
		// The commands codex runs get its core variables only, never the API key (W8).
		"-c", `shell_environment_policy.inherit="core"`}
	args = append(args, noWorkspaceInstructions...)
	if req.Model != "" {
		args = append(args, "-m", req.Model)
	}
	args = append(args, "-o", outFile)
	args = append(args, extra...)
	if req.ThreadID != "" {
		return append(args, "resume", "--", req.ThreadID, "-"), nil
	}
	return append(args, "--", "-"), nil
}
