package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/fsutil"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/receipts"
)

// The agent holds the node to its receipts log (docs/wire.md, "The receipts log"): it keeps,
// per node, the newest checkpoint it has seen; each answer's tlog-proof must put the receipt in
// a checkpoint the node key signed, and that checkpoint must be consistent with the one kept
// (a consistency proof from the node's /log/ tiles). A node whose log shrank, forked or
// rewrote a leaf is reported with both signed checkpoints and distrusted from then on.

// logsFile is the agent's file of checkpoints and distrusted nodes, in its folder.
const logsFile = "logs.json"

// LogError is a node caught signing two statements that cannot both be true: Held is the
// checkpoint the agent kept, Got the one that contradicts it. Both are signed notes anyone can
// check with the node JWKS (docs/threats.md, L1–L3, L10).
type LogError struct {
	Node   string    `json:"node"`
	Reason string    `json:"reason"`
	Held   string    `json:"held"`
	Got    string    `json:"got"`
	At     time.Time `json:"at"`
}

func (e *LogError) Error() string {
	return fmt.Sprintf("the node %s is not trusted: %s. The two signed checkpoints that cannot both be true:\n%s\n%s",
		e.Node, e.Reason, strings.TrimSpace(e.Held), strings.TrimSpace(e.Got))
}

// LogState is logsFile: per log the agent met, the newest checkpoint seen, or the evidence
// against its node. A log is known by what identifies it, its origin and the node keys that
// signed it, never by the address it was reached at (docs/threats.md L10).
type LogState struct {
	Logs []*HeldLog `json:"logs"`
	// Nodes is the file as agents before L10 wrote it (per publicUrl), read once and moved
	// into Logs.
	Nodes map[string]*HeldLog `json:"nodes,omitempty"`
}

// HeldLog is what the agent holds of one node's receipts log.
type HeldLog struct {
	Origin string `json:"origin,omitempty"`
	// Keys are the ids of the node keys seen signing its checkpoints.
	Keys []string `json:"keys,omitempty"`
	// Node is the publicUrl it was last met at (NodeURL).
	Node       string    `json:"node"`
	Checkpoint string    `json:"checkpoint,omitempty"` // signed note, the node's signatures only
	Distrusted *LogError `json:"distrusted,omitempty"`
	// Cosigned is Checkpoint cosigned by this agent's witness key Witness (a vkey), sent with
	// the next call (witness.go).
	Cosigned string `json:"cosigned,omitempty"`
	Witness  string `json:"witness,omitempty"`
}

// logsMu orders the load-change-save steps of one process on logs.json (an MCP server checks
// answers of several calls at once); two processes may still lose one's change.
var logsMu sync.Mutex

// LoadLogs reads the logs.json of the agent folder dir (empty when there is none).
func LoadLogs(dir string) (*LogState, error) {
	path := filepath.Join(dir, logsFile)
	st := &LogState{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s is unreadable: %w", path, err)
	}
	for url, n := range st.Nodes { // keys are learnt when the node is next met (find)
		if n.Node = url; n.Checkpoint != "" {
			n.Origin = lines0(n.Checkpoint)
		}
		st.Logs = append(st.Logs, n)
	}
	st.Nodes = nil
	return st, nil
}

// Save writes st as the logs.json of the agent folder dir, each log's checkpoints bounded.
func (st *LogState) Save(dir string) error {
	for _, l := range st.Logs {
		l.Checkpoint = clip(l.Checkpoint)
		if l.Distrusted != nil {
			l.Distrusted.Held, l.Distrusted.Got = clip(l.Distrusted.Held), clip(l.Distrusted.Got)
		}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(dir, logsFile), data, 0o600)
}

// clip bounds a note kept by an older agent, which kept checkpoints whole: at most
// MaxCheckpointNote bytes, cut after a whole line (the node's signature comes first).
func clip(s string) string {
	if len(s) <= receipts.MaxCheckpointNote {
		return s
	}
	s = s[:receipts.MaxCheckpointNote]
	return s[:strings.LastIndex(s, "\n")+1]
}

func lines0(text string) string { first, _, _ := strings.Cut(text, "\n"); return first }

// NodeURL is a publicUrl as the agent compares addresses: scheme and host in lower case, the
// host without its trailing dot, the scheme's default port and a trailing slash left out.
func NodeURL(publicURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(publicURL))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("the node's publicUrl %q is not an http(s) URL", publicURL)
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/"), nil
}

// LogCheck checks one node's receipts log against what the agent folder Dir holds: a run of
// `aether agent` makes one after reading the card, and so may any client of the package.
type LogCheck struct {
	c    *Client
	node string       // NodeURL of the publicUrl
	base string       // the publicUrl the node's /log/ is read under
	keys keys.History // the node JWKS with its rotation statements (T13)
	dir  string
}

// NewLogCheck is the check of the log of the node at publicURL, whose JWKS is h, against what
// the agent folder dir holds; c reads the node's /log/.
func NewLogCheck(c *Client, publicURL string, h keys.History, dir string) (*LogCheck, error) {
	node, err := NodeURL(publicURL)
	if err != nil {
		return nil, err
	}
	return &LogCheck{c: c, node: node, base: strings.TrimRight(publicURL, "/"), keys: h, dir: dir}, nil
}

// update runs change on the held state and saves it, whatever change returned.
func (lc *LogCheck) update(change func(*LogState) error) error {
	logsMu.Lock()
	defer logsMu.Unlock()
	st, err := LoadLogs(lc.dir)
	if err != nil {
		return err
	}
	err = change(st)
	return errors.Join(err, st.Save(lc.dir))
}

// find is the log held for this node, nil if none: the one whose checkpoints a key of the
// node JWKS signed, at whatever address it was met (L10), which becomes its address (a log
// held from an older logs.json, with no keys yet, is found by its address once its checkpoint
// verifies). A node key seen signing two logs is a contradiction; a log held at its address
// that none of its keys signs is an error (it proves nothing, and starting afresh would
// forget it).
func (lc *LogCheck) find(st *LogState) (*HeldLog, error) {
	var found *HeldLog
	for _, l := range st.Logs {
		if len(l.Keys) == 0 && l.Node == lc.node && l.Checkpoint != "" {
			if _, err := receipts.OpenCheckpointOf([]byte(l.Checkpoint), lc.keys, ""); err != nil {
				return nil, fmt.Errorf("the checkpoint held for %s: %w", lc.node, err)
			}
			_, l.Keys, _ = receipts.NodeSigned([]byte(l.Checkpoint), lc.keys.Set)
		}
		if !slices.ContainsFunc(l.Keys, func(k string) bool { _, ok := lc.keys.Set[k]; return ok }) {
			continue
		}
		if l.Distrusted != nil {
			return nil, l.Distrusted
		}
		if found != nil {
			return nil, lc.distrust(l, &LogError{Reason: fmt.Sprintf("its key signed checkpoints of two logs, %q and %q", found.Origin, l.Origin),
				Held: found.Checkpoint, Got: l.Checkpoint})
		}
		found = l
	}
	for _, l := range st.Logs {
		switch {
		case l == found || l.Node != lc.node:
		case l.Distrusted != nil:
			return nil, l.Distrusted
		case found == nil:
			return nil, fmt.Errorf("the node %s no longer signs with the key of the log held for it (%s): it is another node, or its key was replaced without `aether keys rotate`; remove that log from %s to trust it anew",
				lc.node, strings.Join(l.Keys, ", "), filepath.Join(lc.dir, logsFile))
		}
	}
	if found != nil { // a node may move (Funnel): its log is held to what it signed wherever it is served
		found.Node = lc.node
	}
	return found, nil
}

// distrust records le against l and returns it.
func (lc *LogCheck) distrust(l *HeldLog, le *LogError) *LogError {
	le.Node, le.At = lc.node, time.Now().UTC()
	l.Distrusted = le
	return le
}

// HeldCheckpoint is the newest checkpoint of the log of the node at publicURL (whose JWKS is
// h) that the agent in dir has seen ("" if none): what it hands a peer to compare (`aether
// agent --peer-checkpoint`).
func HeldCheckpoint(dir, publicURL string, h keys.History) (string, error) {
	lc, err := NewLogCheck(nil, publicURL, h, dir)
	if err != nil {
		return "", err
	}
	var held string
	err = lc.update(func(st *LogState) error {
		l, err := lc.find(st)
		if l != nil {
			held = l.Checkpoint
		}
		return err
	})
	return held, err
}

// Before refuses a distrusted node, and compares a peer's checkpoint of the node's log, when
// given, with the one held (the gossip step, L2).
func (lc *LogCheck) Before(ctx context.Context, peer []byte) error {
	return lc.update(func(st *LogState) error {
		l, err := lc.find(st)
		if err != nil || len(peer) == 0 {
			return err
		}
		if _, err := receipts.OpenCheckpointOf(peer, lc.keys, ""); err != nil {
			return fmt.Errorf("the peer's checkpoint: %w", err)
		}
		return lc.observe(ctx, st, l, peer)
	})
}

// CheckAnswer checks an answer's receipt against the log: its proof (the receipt jws of seq
// seq in a checkpoint the node keys signed), then that checkpoint against the one held (L1–L4),
// which it then holds. The receipt itself is checked by VerifyReceipt.
func (lc *LogCheck) CheckAnswer(ctx context.Context, proof, jws string, seq int64) (receipts.Checkpoint, error) {
	if proof == "" {
		return receipts.Checkpoint{}, fmt.Errorf("the receipt %d came without its tlog-proof in the node's log", seq)
	}
	cp, err := receipts.VerifyProof(proof, jws, seq, lc.keys.Set)
	if err != nil {
		return receipts.Checkpoint{}, fmt.Errorf("the receipt's log proof: %w", err)
	}
	p, _ := receipts.ParseProof(proof)
	return cp, lc.update(func(st *LogState) error {
		l, err := lc.find(st)
		if err != nil {
			return err
		}
		return lc.observe(ctx, st, l, p.Checkpoint)
	})
}

// observe checks a signed checkpoint of the node's log against l, the log held (nil: none),
// keeps the newer one, and distrusts the node on a contradiction.
func (lc *LogCheck) observe(ctx context.Context, st *LogState, l *HeldLog, got []byte) error {
	g, err := receipts.OpenCheckpointOf(got, lc.keys, "")
	if err != nil {
		return err
	}
	kept, kids, err := receipts.NodeSigned(got, lc.keys.Set)
	if err != nil {
		return err
	}
	if l == nil {
		st.Logs = append(st.Logs, &HeldLog{Origin: g.Origin, Keys: kids, Node: lc.node, Checkpoint: string(kept)})
		return nil
	}
	newest, err := lc.reconcile(ctx, l, g, string(kept))
	var le *LogError
	if errors.As(err, &le) {
		return lc.distrust(l, le)
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if !slices.Contains(l.Keys, k) {
			l.Keys = append(l.Keys, k)
		}
	}
	l.Origin, l.Checkpoint = lines0(newest), newest
	return nil
}

// reconcile returns the newest of the checkpoint held of l and got (g) once they are shown to
// be one log's views, or a *LogError naming the contradiction. A log made before commitments
// and the log it moved to (receipts.MovedFrom) hold the same receipts: the one moved to is
// the newer, and may not be the smaller.
func (lc *LogCheck) reconcile(ctx context.Context, l *HeldLog, g receipts.Checkpoint, got string) (string, error) {
	held := l.Checkpoint
	h, err := receipts.OpenCheckpointOf([]byte(held), lc.keys, "")
	if err != nil {
		return "", fmt.Errorf("the checkpoint held for %s: %w", lc.node, err)
	}
	switch {
	case receipts.MovedFrom(g.Origin) == h.Origin:
		if g.Size < h.Size {
			return "", &LogError{Reason: fmt.Sprintf("its log of %d receipts moved to commitments as one of %d: receipts were lost", h.Size, g.Size), Held: held, Got: got}
		}
		return got, nil
	case receipts.MovedFrom(h.Origin) == g.Origin:
		if g.Size > h.Size {
			return "", &LogError{Reason: fmt.Sprintf("its log moved to commitments at %d receipts or fewer, yet it signed the log it left at %d", h.Size, g.Size), Held: held, Got: got}
		}
		return held, nil
	case g.Origin != h.Origin:
		return "", &LogError{Reason: fmt.Sprintf("its key signed checkpoints of two logs, %q and %q", h.Origin, g.Origin), Held: held, Got: got}
	}
	small, big, smallNote, bigNote := h, g, held, got
	if g.Size < h.Size {
		small, big, smallNote, bigNote = g, h, got, held
	}
	err = lc.consistent(ctx, small, big)
	if errors.Is(err, errTiles) && ctx.Err() == nil {
		// The node cannot show the tree of a checkpoint it signed: is it still that large?
		return "", lc.shrank(ctx, big, bigNote, err)
	}
	if err != nil && !errors.Is(err, errTiles) {
		return "", &LogError{Reason: err.Error(), Held: smallNote, Got: bigNote}
	}
	return bigNote, err
}

// shrank fetches the node's current checkpoint after its tiles failed (tilesErr): one smaller
// than big, which it signed, is a contradiction; otherwise tilesErr stands.
func (lc *LogCheck) shrank(ctx context.Context, big receipts.Checkpoint, bigNote string, tilesErr error) error {
	latest, err := lc.c.get(ctx, lc.base+"/log/checkpoint", "the node's log checkpoint")
	if err != nil {
		return errors.Join(tilesErr, err)
	}
	l, err := receipts.OpenCheckpointOf(latest, lc.keys, big.Origin)
	if err != nil {
		return fmt.Errorf("the node's log checkpoint: %w", err)
	}
	if l.Size < big.Size {
		kept, _, _ := receipts.NodeSigned(latest, lc.keys.Set)
		return &LogError{Reason: fmt.Sprintf("it signed a log of %d receipts and now serves one of %d: its log shrank (rolled back) or forked", big.Size, l.Size),
			Held: bigNote, Got: string(kept)}
	}
	return tilesErr
}

// errTiles marks a failure to read the node's tiles, which proves nothing against it.
var errTiles = errors.New("the node's log tiles")

// consistent checks that small is a prefix of big (big.Size ≥ small.Size) with a consistency
// proof built from the node's tiles, which are checked against big's root as they are read.
// A failure to fetch comes back wrapped in errTiles; anything else is a contradiction.
func (lc *LogCheck) consistent(ctx context.Context, small, big receipts.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", errTiles, err)
	}
	if small.Size == big.Size {
		if small.Root != big.Root {
			return fmt.Errorf("it signed two different logs of %d receipts: forked, or an old receipt rewritten", big.Size)
		}
		return nil
	}
	hr := tlog.TileHashReader(tlog.Tree{N: big.Size, Hash: big.Root}, &tileFetcher{ctx: ctx, c: lc.c, base: lc.base + "/log/"})
	proof, err := tlog.ProveTree(big.Size, small.Size, hr)
	if err != nil {
		return fmt.Errorf("%w: %w", errTiles, err)
	}
	if err := tlog.CheckTree(proof, big.Size, big.Root, small.Size, small.Root); err != nil {
		return fmt.Errorf("its log of %d receipts does not extend the one of %d it signed before: forked, or an old receipt rewritten", big.Size, small.Size)
	}
	return nil
}

// tileFetcher reads C2SP tiles from the node's /log/ (tlog.TileReader).
type tileFetcher struct {
	ctx  context.Context
	c    *Client
	base string
}

func (f *tileFetcher) Height() int { return receipts.TileHeight }

func (f *tileFetcher) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		// tlog writes tile/<H>/<L>/<N>; C2SP leaves the height out.
		path := "tile/" + strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", t.H))
		data, err := f.c.get(f.ctx, f.base+path, "log tile "+path)
		if err != nil {
			return nil, err
		}
		if len(data) != t.W*tlog.HashSize {
			return nil, fmt.Errorf("log tile %s is %d bytes, want %d", path, len(data), t.W*tlog.HashSize)
		}
		out[i] = data
	}
	return out, nil
}

func (f *tileFetcher) SaveTiles([]tlog.Tile, [][]byte) {}

// checkAnswerLog is the log check of a run's answer (LogCheck.CheckAnswer), said in words.
func checkAnswerLog(ctx context.Context, lc *LogCheck, out Outcome, seq int64, say func(string, ...any)) (*receipts.Checkpoint, error) {
	cp, err := lc.CheckAnswer(ctx, out.ReceiptProof, out.ReceiptJWS, seq)
	if err != nil {
		return nil, err
	}
	say("      in the node's log %s (checkpoint of %d receipts, signed), consistent with every checkpoint seen before.", cp.Origin, cp.Size)
	return &cp, nil
}
