package policy

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aether/aether/backend/domain"
)

const (
	maxIDLen           = 64
	maxScopeIDLen      = 128
	maxNameLen         = 100
	maxDescriptionLen  = 1000
	maxInstructionsLen = 32 << 10
)

// Validate checks p by the same rules as Load, reporting problems by the same JSON paths, with
// relative workspaces taken relative to baseDir (the folder policy.json is or will be in). It
// does not change p. It returns nil or an *Error. The Limits and policy file p was loaded with
// (see Limits) are checked too.
func Validate(p *Policy, baseDir string) error {
	var lim Limits
	var file string
	if p != nil {
		lim, file = p.limits, p.file
	}
	return validate(p, baseDir, file, lim)
}

// validate is Validate with the policy file and Limits given.
func validate(p *Policy, baseDir, policyFile string, lim Limits) error {
	c := newChecker(baseDir, nil, resolveBounds(lim, policyFile))
	c.policy(p)
	if len(c.problems) > 0 {
		return &Error{Problems: c.problems}
	}
	return nil
}

// checker applies the rules that need more than one field, or the disk.
type checker struct {
	problems []Problem
	skip     []string // paths already reported while decoding
	base     string   // resolved policy folder
	baseErr  error
	home     string
	bounds   bounds            // data dir and policy file, resolved
	dirs     []string          // resolved workspace per brand index
	scopeAt  map[string]string // lower-cased scope id → path of its first declaration
}

func newChecker(baseDir string, skip []string, bd bounds) *checker {
	c := &checker{skip: skip, home: homeDir(), bounds: bd, scopeAt: map[string]string{}}
	c.base, c.baseErr = resolveBase(baseDir)
	return c
}

func (c *checker) add(path, msg string) {
	for _, s := range c.skip {
		if s == "" || path == s || strings.HasPrefix(path, s+".") || strings.HasPrefix(path, s+"[") {
			return
		}
	}
	c.problems = append(c.problems, Problem{Path: path, Message: msg})
}

func (c *checker) policy(p *Policy) {
	if p == nil {
		c.add("", "there is no policy")
		return
	}
	for i, s := range p.Scopes {
		c.scope(indexPath("scopes", i), s, false)
	}
	if p.Pact != nil {
		c.pact("pact", p.Pact)
	}
}

func (c *checker) pact(path string, pc *Pact) {
	c.url(path+".publicUrl", pc.PublicURL)
	c.url(path+".audience", pc.Audience)
	if why := c.public(pc); pc.AllowInsecureLocalIssuers && why != "" {
		c.add(path+".allowInsecureLocalIssuers", "must not be set while "+why+": it is for tests on this computer only, "+
			"and with it anyone who reaches the gateway can make this node fetch addresses on this computer (docs/threats.md N4). "+
			"Remove it from policy.json")
	}
	for i, s := range pc.TrustedProxies {
		if _, err := parseProxy(s); err != nil {
			c.add(indexPath(path+".trustedProxies", i), fmt.Sprintf("%q is not an address or a CIDR; write the proxy's address, e.g. \"127.0.0.1/32\" or \"::1\"", s))
		}
	}
	if d := pc.TaskRetentionDays; d < 0 || d > MaxTaskRetentionDays {
		c.add(path+".taskRetentionDays", fmt.Sprintf("must be a whole number of days from 1 to %d, found %d", MaxTaskRetentionDays, d))
	}
	ids := map[domain.BrandID]int{}
	c.dirs = make([]string, len(pc.Brands))
	for i, b := range pc.Brands {
		bp := indexPath(path+".brands", i)
		if b.ID != "" {
			if first, dup := ids[b.ID]; dup {
				c.add(bp+".id", fmt.Sprintf("%q is already the id of %s; brand ids must be unique", b.ID, indexPath(path+".brands", first)))
			} else {
				ids[b.ID] = i
			}
		}
		c.dirs[i] = c.brand(bp, b)
	}
	c.overlaps(path+".brands", pc.Brands)
}

// overlaps refuses a read_write workspace that overlaps another brand's (docs/threats.md W12):
// a turn of the one could change the files the other's turns read and answer from. Both brands
// of a pair are told, each naming the other, so the Brands form shows it on whichever brand was
// edited; each brand is told of its first such pair only.
func (c *checker) overlaps(path string, brands []Brand) {
	for i, a := range brands {
		if c.dirs[i] == "" {
			continue
		}
		for j, b := range brands {
			if j == i || c.dirs[j] == "" || (a.AccessMode != domain.ReadWrite && b.AccessMode != domain.ReadWrite) {
				continue
			}
			how := overlapping(c.dirs[i], c.dirs[j])
			if how == "" {
				continue
			}
			other := fmt.Sprintf("%s (%q, %s)", indexPath(path, j), b.ID, c.dirs[j])
			var msg string
			if a.AccessMode == domain.ReadWrite {
				msg = fmt.Sprintf("this read_write workspace %s %s the workspace of %s, so its turns could change that brand's files; give each read_write brand a folder of its own, apart from every other brand's workspace", c.dirs[i], how, other)
			} else {
				msg = fmt.Sprintf("this workspace %s %s the read_write workspace of %s, whose turns could change this brand's files; give the read_write brand a folder of its own, apart from every other brand's workspace", c.dirs[i], how, other)
			}
			c.add(indexPath(path, i)+".workspace", msg)
			break
		}
	}
}

// brand checks one brand and returns its resolved workspace ("" when invalid).
func (c *checker) brand(path string, b Brand) string {
	if b.ID == "" {
		c.add(path+".id", `is required: a short lowercase name such as "review"; it becomes the URL path /a2a/<id>`)
	} else if msg := idProblem(string(b.ID), "it becomes the URL path /a2a/<id>"); msg != "" {
		c.add(path+".id", msg)
	}
	c.text(path+".name", b.Name, maxNameLen, false, `the name agents see, e.g. "Code review"`)
	c.text(path+".description", b.Description, maxDescriptionLen, true, `one sentence agents see, e.g. "Reviews code in my workspace."`)
	c.capability(path, b)
	switch {
	case b.AccessMode == "":
		c.add(path+".accessMode", "is required: read_only or read_write")
	case !b.AccessMode.Valid():
		msg := fmt.Sprintf("%q is not one of %s", b.AccessMode, strings.Join(accessModes, ", "))
		if g := suggest(string(b.AccessMode), accessModes, true); g != "" {
			msg += fmt.Sprintf("; did you mean %s?", g)
		}
		c.add(path+".accessMode", msg)
	}
	c.scope(path+".scope", b.Scope, true)
	c.model(path, b)
	if c.baseErr != nil {
		c.add(path+".workspace", fmt.Sprintf("cannot be checked: %v", c.baseErr))
		return ""
	}
	dir, msg := resolveWorkspace(b.Workspace, c.base, c.home, b.AccessMode == domain.ReadWrite, c.bounds)
	if msg != "" {
		c.add(path+".workspace", msg)
	}
	return dir
}

// model checks the brand's model name (it becomes a TOML string in a `-c` option to Codex)
// and its budget.
func (c *checker) model(path string, b Brand) {
	if len(b.Model) > 200 || strings.HasPrefix(b.Model, "-") ||
		strings.ContainsFunc(b.Model, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' || r == '\\' || r == '\'' }) {
		c.add(path+".modelName", "must be a model name of at most 200 printable ASCII characters without spaces, quotes or backslashes, e.g. \"gpt-5\"")
	}
	if b.TokensPerDay < 0 {
		c.add(path+".tokensPerDay", "must be 0 (no limit) or a number of tokens a day")
	}
}

func (c *checker) capability(path string, b Brand) {
	_, builtin := builtins[b.Capability]
	names := builtinNames()
	switch {
	case b.Capability == "":
		c.add(path+".capability", fmt.Sprintf(`is required: a built-in capability (%s), or a name of your own together with "instructions"`, strings.Join(names, ", ")))
	case builtin && b.Instructions != "":
		c.add(path+".instructions", fmt.Sprintf(`capability %q is built in and brings its own instructions; remove "instructions", or give your capability a name of its own`, b.Capability))
	case builtin:
	case strings.TrimSpace(b.Instructions) == "":
		msg := fmt.Sprintf("%q is not a built-in capability (built in: %s)", b.Capability, strings.Join(names, ", "))
		if g := suggest(b.Capability, names, false); g != "" {
			msg += fmt.Sprintf("; did you mean %q?", g)
		}
		c.add(path+".capability", msg+`; to define your own, keep the name and add "instructions" with the text Codex should follow`)
	default:
		if msg := idProblem(b.Capability, "it names your own capability"); msg != "" {
			c.add(path+".capability", msg)
		}
		c.text(path+".instructions", b.Instructions, maxInstructionsLen, true, "")
	}
}

// text checks a free-text field shown to people.
func (c *checker) text(path, s string, max int, multiline bool, what string) {
	if strings.TrimSpace(s) == "" {
		c.add(path, "is required: "+what)
		return
	}
	if n := utf8.RuneCountInString(s); n > max {
		c.add(path, fmt.Sprintf("is %d characters long; keep it to %d", n, max))
		return
	}
	for _, r := range s {
		if (r < 0x20 && !(multiline && (r == '\n' || r == '\t'))) || r == 0x7f || isBidiControl(r) {
			c.add(path, fmt.Sprintf("contains the control character U+%04X; remove it", r))
			return
		}
	}
}

// isBidiControl reports the characters that reorder text on screen (C9: text shown in the UI).
func isBidiControl(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 || r == 0x200E || r == 0x200F
}

// scope checks a scope declaration and that its id is declared only once.
func (c *checker) scope(path string, s Scope, ofBrand bool) {
	if ofBrand && s.ID == "" && s.Description == "" {
		c.add(path, `is required: {"id": "<brand>:read_only", "description": "…"}`)
		return
	}
	switch {
	case s.ID == "":
		c.add(path+".id", `is required, e.g. "review:read_only"`)
	case strings.EqualFold(strings.TrimSpace(s.ID), PactScope):
		c.add(path+".id", "the node adds the pact scope; do not declare it")
	default:
		if msg := scopeIDProblem(s.ID); msg != "" {
			c.add(path+".id", msg)
		} else if first, dup := c.scopeAt[strings.ToLower(s.ID)]; dup {
			c.add(path+".id", fmt.Sprintf("scope %q is already declared at %s; every scope is declared once and each brand needs its own", s.ID, first))
		} else {
			c.scopeAt[strings.ToLower(s.ID)] = path + ".id"
		}
	}
	c.text(path+".description", s.Description, maxDescriptionLen, false, "the text the owner and agents see for this scope")
}

// idProblem checks a name that ends up in URLs: lowercase letters, digits and inner dashes.
func idProblem(id, why string) string {
	if len(id) > maxIDLen {
		return fmt.Sprintf("is %d characters long; use at most %d", len(id), maxIDLen)
	}
	for _, r := range id {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-') {
			msg := fmt.Sprintf("%q contains %q; use lowercase letters, digits and - only (%s)", id, r, why)
			if lower := strings.ToLower(id); lower != id && idProblem(lower, why) == "" {
				msg += fmt.Sprintf("; did you mean %q?", lower)
			}
			return msg
		}
	}
	if strings.HasPrefix(id, "-") || strings.HasSuffix(id, "-") {
		return fmt.Sprintf("%q starts or ends with -; start and end with a letter or digit", id)
	}
	return ""
}

// scopeIDProblem applies RFC 6749's scope-token characters: printable ASCII except space, " and \.
func scopeIDProblem(id string) string {
	if len(id) > maxScopeIDLen {
		return fmt.Sprintf("is %d characters long; use at most %d", len(id), maxScopeIDLen)
	}
	for _, r := range id {
		if r <= ' ' || r >= 0x7f || r == '"' || r == '\\' {
			return fmt.Sprintf("%q contains %q; a scope id is printable ASCII without spaces, quotes or backslashes, e.g. review:read_only", id, r)
		}
	}
	return ""
}

// public says why the gateway is public, "" when only this computer reaches it: public is
// reachable by, or told to, anyone but this computer's own processes. That is Funnel on
// (pact.funnel, or the node's --funnel), a publicUrl or audience whose host is not loopback
// (an https proxy or domain, a LAN address, a tailnet name), or a gateway listening on an
// address that is not loopback (Limits). allowInsecureLocalIssuers never goes with it (N4).
func (c *checker) public(pc *Pact) string {
	switch {
	case pc.Funnel:
		return "pact.funnel is on (the gateway is on the internet)"
	case c.bounds.public != "":
		return c.bounds.public
	}
	for _, raw := range []string{pc.PublicURL, pc.Audience} {
		if u, err := url.Parse(raw); err == nil && u.Host != "" && !isLoopback(u.Hostname()) {
			return fmt.Sprintf("the gateway is reached at %q, which is not on this computer", raw)
		}
	}
	return ""
}

// url checks publicUrl and audience: absolute, lowercase scheme and host, https unless the
// host is loopback, nothing that breaks appending a path.
func (c *checker) url(path, raw string) {
	if raw == "" {
		c.add(path, "is required: the URL agents use to reach this node, e.g. https://aether.example.com")
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		c.add(path, fmt.Sprintf("%q is not a valid URL (%v)", raw, err))
		return
	}
	var msg string
	switch {
	case !u.IsAbs() || u.Host == "" || u.Opaque != "":
		msg = fmt.Sprintf("%q is not an absolute URL; write scheme and host, e.g. https://aether.example.com", raw)
	case u.User != nil:
		msg = fmt.Sprintf("%q contains a user name or password; remove it", raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		msg = fmt.Sprintf("%q has a query or fragment; remove it", raw)
	case strings.HasSuffix(u.Path, "/"):
		msg = fmt.Sprintf("%q ends with /; remove it (card and token URLs are built by appending to it)", raw)
	case raw[:len(u.Scheme)] != u.Scheme || u.Host != strings.ToLower(u.Host):
		msg = fmt.Sprintf("%q must be written in lowercase in its scheme and host, as agents compare it exactly", raw)
	case u.Port() != "" && !validPort(u.Port()):
		msg = fmt.Sprintf("%q has an invalid port", raw)
	case u.Scheme == "https":
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		msg = fmt.Sprintf("%q uses http with a host that is not loopback; use https (put a TLS proxy in front of the gateway): http is only for localhost, 127.0.0.1 or [::1]", raw)
	case u.Scheme != "http":
		msg = fmt.Sprintf("%q has the scheme %q; use https", raw, u.Scheme)
	}
	if msg != "" {
		c.add(path, msg)
	}
}

func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && n <= 65535 && s[0] != '0'
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.IsLoopback()
}
