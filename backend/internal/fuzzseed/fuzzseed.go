// Package fuzzseed keeps the seed corpora of the fuzz targets (README.md, "Fuzzing"). Seeds live
// in each package's testdata/fuzz/<FuzzName>/, where `go test` runs them; a target lists its
// seeds in code and Write turns them into those files, so signed seeds (tokens, receipt chains)
// can be made again when their keys or clock change.
package fuzzseed

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Env names the variable that makes Write (re)write the seed files.
const Env = "AETHER_FUZZ_SEEDS"

// Seed is one named input: its values in the order of the fuzz function's arguments.
type Seed struct {
	Name   string
	Values []any
}

// S makes a Seed.
func S(name string, values ...any) Seed { return Seed{Name: name, Values: values} }

var safeName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Write writes seeds to testdata/fuzz/<f.Name()>/<name> when AETHER_FUZZ_SEEDS=write, and
// does nothing otherwise: `go test` reads those files by itself. A file of the same name is
// replaced; crashers the fuzzer added (hex names) are left alone.
func Write(f *testing.F, seeds []Seed) {
	f.Helper()
	if os.Getenv(Env) != "write" {
		return
	}
	dir := filepath.Join("testdata", "fuzz", f.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		if !safeName.MatchString(s.Name) {
			f.Fatalf("seed name %q: use lowercase letters, digits and -", s.Name)
		}
		if err := os.WriteFile(filepath.Join(dir, s.Name), Encode(s.Values...), 0o644); err != nil {
			f.Fatal(err)
		}
	}
}

// Encode is the corpus file format of `go test` ("go test fuzz v1").
func Encode(values ...any) []byte {
	b := []byte("go test fuzz v1\n")
	for _, v := range values {
		switch t := v.(type) {
		case []byte:
			b = fmt.Appendf(b, "[]byte(%q)\n", t)
		case string:
			b = fmt.Appendf(b, "string(%q)\n", t)
		case byte:
			b = fmt.Appendf(b, "byte(%q)\n", t)
		case bool, int, int64, uint64:
			b = fmt.Appendf(b, "%T(%v)\n", t, t)
		default:
			panic(fmt.Sprintf("fuzzseed: cannot encode %T", v))
		}
	}
	return b
}
