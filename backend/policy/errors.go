package policy

import "strings"

// Problem is one thing wrong with a policy, located by its JSON path.
type Problem struct {
	// Path is the JSON path of the offending value, such as pact.brands[0].workspace.
	// It is empty when the problem is with the file as a whole (size, encoding, syntax, permissions).
	Path string `json:"path"`
	// Message says what is wrong and what to do about it.
	Message string `json:"message"`
}

// Error lists every problem found in a policy, not just the first one.
type Error struct {
	// File names the policy file in messages; empty prints as "policy.json".
	File     string
	Problems []Problem
}

// Error prints one "file: path: message" line per problem.
func (e *Error) Error() string {
	name := e.File
	if name == "" {
		name = "policy.json"
	}
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(name)
		b.WriteString(": ")
		if p.Path != "" {
			b.WriteString(p.Path)
			b.WriteString(": ")
		}
		b.WriteString(p.Message)
	}
	return b.String()
}
