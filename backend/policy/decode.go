package policy

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aether/aether/backend/domain"
)

var (
	topFields   = []string{"pact", "scopes"}
	pactFields  = []string{"publicUrl", "audience", "allowInsecureLocalIssuers", "trustedProxies", "taskRetentionDays", "funnel", "tailnet", "brands"}
	brandFields = []string{"id", "name", "description", "capability", "instructions", "workspace", "accessMode", "scope", "modelName", "tokensPerDay"}
	scopeFields = []string{"id", "description"}
)

// decoder turns a parsed tree into a Policy, collecting type and field-name problems.
type decoder struct {
	problems []Problem
	// reported are paths whose problems are already told; the semantic checks skip them and
	// everything below them, so one mistake gives one message.
	reported []string
}

func (d *decoder) report(path, msg string) {
	d.problems = append(d.problems, Problem{Path: path, Message: msg})
	d.reported = append(d.reported, path)
}

// decodeDocument reads the managed sections of root and keeps every top-level member verbatim.
func (d *decoder) decodeDocument(src []byte, root *node) *Policy {
	p := &Policy{}
	if root.kind != kindObject {
		d.report("", fmt.Sprintf(`must be a JSON object such as {"pact": {…}}, found %s`, root.describe()))
		return p
	}
	p.sections = sectionsOf(src, root)
	f := d.fields("", root, topFields, true)
	if v := f["pact"]; v != nil {
		p.Pact = d.pact("pact", v)
	}
	if v := f["scopes"]; v != nil {
		p.Scopes = d.scopeList("scopes", v)
	}
	return p
}

// sectionsOf copies the top-level members of the object root verbatim.
func sectionsOf(src []byte, root *node) []section {
	out := make([]section, 0, len(root.members))
	for _, m := range root.members {
		out = append(out, section{
			key:    m.key,
			rawKey: bytes.Clone(src[m.keyStart:m.keyEnd]),
			raw:    bytes.Clone(src[m.val.start:m.val.end]),
		})
	}
	return out
}

// fields returns the object's members with known keys (first occurrence; repeats are reported
// by the parser). Other keys are reported as unknown, with a guess at what was meant; with open,
// only keys that look like a known one are reported and the rest are left alone.
func (d *decoder) fields(path string, n *node, known []string, open bool) map[string]*node {
	if n.kind != kindObject {
		d.report(path, "must be an object, found "+n.describe())
		return nil
	}
	got := map[string]*node{}
	for i, m := range n.members {
		if slices.Contains(known, m.key) {
			if _, seen := got[m.key]; !seen {
				got[m.key] = m.val
			}
			continue
		}
		at := keyPath(path, m.key)
		if twin := caseTwin(n.members, i, known); twin != "" {
			d.report(at, fmt.Sprintf("%q differs from %q only in case; JSON keys are case-sensitive, keep only %q", m.key, twin, twin))
			continue
		}
		var guess string
		if open {
			guess = sectionGuess(m.key, known)
		} else {
			guess = suggest(m.key, known, true)
		}
		caseNote := ""
		if strings.EqualFold(guess, m.key) {
			caseNote = " (keys are case-sensitive)"
		}
		switch {
		case open && guess != "":
			d.report(at, fmt.Sprintf("unknown section %q; did you mean %q?%s", m.key, guess, caseNote))
		case open:
			continue // another tool's section
		case guess != "":
			d.report(at, fmt.Sprintf("unknown field %q; did you mean %q?%s", m.key, guess, caseNote))
		default:
			d.report(at, fmt.Sprintf("unknown field %q; the fields here are %s", m.key, strings.Join(known, ", ")))
		}
		if guess != "" {
			// The misspelt field is not also "missing".
			d.reported = append(d.reported, keyPath(path, guess))
		}
	}
	return got
}

// caseTwin returns a key of the object that differs from members[i].key only in case and
// takes precedence over it: a known key, or an earlier one.
func caseTwin(members []member, i int, known []string) string {
	key := members[i].key
	for j, m := range members {
		if j == i || m.key == key || !strings.EqualFold(m.key, key) {
			continue
		}
		if j < i || slices.Contains(known, m.key) {
			return m.key
		}
	}
	return ""
}

// sectionGuess is suggest made cautious for top-level keys, which may belong to other tools:
// only another spelling of a known key (case, "_", "-", a plural s) counts.
func sectionGuess(key string, known []string) string {
	k := strings.TrimSuffix(normalizeName(key), "s")
	for _, c := range known {
		if strings.TrimSuffix(normalizeName(c), "s") == k {
			return c
		}
	}
	return ""
}

func (d *decoder) str(path string, n *node) string {
	if n == nil {
		return ""
	}
	if n.kind != kindString {
		d.report(path, "must be a string, found "+n.describe())
		return ""
	}
	return n.str
}

// days reads a whole number of days (Validate checks its range).
func (d *decoder) days(path string, n *node) int {
	v, err := strconv.Atoi(n.str)
	if n.kind != kindNumber || err != nil || v < 1 || v > MaxTaskRetentionDays {
		d.report(path, fmt.Sprintf("must be a whole number of days from 1 to %d, found %s", MaxTaskRetentionDays, n.describe()))
		return 0
	}
	return v
}

// tokens reads a budget of model tokens a day: 0 (no limit) or more.
func (d *decoder) tokens(path string, n *node) int64 {
	v, err := strconv.ParseInt(n.str, 10, 64)
	if n.kind != kindNumber || err != nil || v < 0 {
		d.report(path, "must be 0 (no limit) or a whole number of tokens a day, found "+n.describe())
		return 0
	}
	return v
}

func (d *decoder) boolean(path string, n *node) bool {
	if n == nil {
		return false
	}
	if n.kind != kindBool {
		d.report(path, "must be true or false, found "+n.describe())
		return false
	}
	return n.b
}

func (d *decoder) pact(path string, n *node) *Pact {
	f := d.fields(path, n, pactFields, false)
	if f == nil {
		return nil
	}
	pc := &Pact{
		PublicURL:                 d.str(path+".publicUrl", f["publicUrl"]),
		Audience:                  d.str(path+".audience", f["audience"]),
		AllowInsecureLocalIssuers: d.boolean(path+".allowInsecureLocalIssuers", f["allowInsecureLocalIssuers"]),
		Funnel:                    d.boolean(path+".funnel", f["funnel"]),
		Tailnet:                   d.boolean(path+".tailnet", f["tailnet"]),
		Brands:                    []Brand{},
	}
	if v := f["trustedProxies"]; v != nil {
		if v.kind != kindArray {
			d.report(path+".trustedProxies", `must be an array of CIDRs such as "127.0.0.1/32", found `+v.describe())
		} else {
			for i, e := range v.elems {
				pc.TrustedProxies = append(pc.TrustedProxies, d.str(indexPath(path+".trustedProxies", i), e))
			}
		}
	}
	if v := f["taskRetentionDays"]; v != nil {
		pc.TaskRetentionDays = d.days(path+".taskRetentionDays", v)
	}
	if v := f["brands"]; v != nil {
		if v.kind != kindArray {
			d.report(path+".brands", "must be an array of brands, found "+v.describe())
		} else {
			for i, e := range v.elems {
				// A bad element still takes its place, so later brands keep their index in paths.
				pc.Brands = append(pc.Brands, d.brand(indexPath(path+".brands", i), e))
			}
		}
	}
	return pc
}

func (d *decoder) brand(path string, n *node) Brand {
	f := d.fields(path, n, brandFields, false)
	if f == nil {
		return Brand{}
	}
	b := Brand{
		ID:           domain.BrandID(d.str(path+".id", f["id"])),
		Name:         d.str(path+".name", f["name"]),
		Description:  d.str(path+".description", f["description"]),
		Capability:   d.str(path+".capability", f["capability"]),
		Instructions: d.str(path+".instructions", f["instructions"]),
		Workspace:    d.str(path+".workspace", f["workspace"]),
		AccessMode:   domain.AccessMode(d.str(path+".accessMode", f["accessMode"])),
		Model:        d.str(path+".modelName", f["modelName"]),
	}
	if v := f["tokensPerDay"]; v != nil {
		b.TokensPerDay = d.tokens(path+".tokensPerDay", v)
	}
	if v := f["scope"]; v != nil {
		b.Scope = d.scope(path+".scope", v)
	}
	return b
}

func (d *decoder) scope(path string, n *node) Scope {
	f := d.fields(path, n, scopeFields, false)
	if f == nil {
		return Scope{}
	}
	return Scope{ID: d.str(path+".id", f["id"]), Description: d.str(path+".description", f["description"])}
}

func (d *decoder) scopeList(path string, n *node) []Scope {
	if n.kind != kindArray {
		d.report(path, `must be an array of {"id": …, "description": …} objects, found `+n.describe())
		return nil
	}
	out := make([]Scope, 0, len(n.elems))
	for i, e := range n.elems {
		out = append(out, d.scope(indexPath(path, i), e))
	}
	return out
}
