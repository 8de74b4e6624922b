package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// LogError is a node caught signing two checkpoints that cannot both be true: Held is the one
// the agent kept, Got the one that contradicts it. Both are signed notes anyone can check with
// the node JWKS (docs/threats.md, L1–L3).
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

// logState is logsFile: per node publicUrl, the newest checkpoint seen, or the evidence against it.
type logState struct {
	Nodes map[string]*nodeLog `json:"nodes"`
}

type nodeLog struct {
	Checkpoint string    `json:"checkpoint,omitempty"` // signed note
	Distrusted *LogError `json:"distrusted,omitempty"`
	// Cosigned is Checkpoint cosigned by this agent's witness key Witness (a vkey), sent with
	// the next call (witness.go).
	Cosigned string `json:"cosigned,omitempty"`
	Witness  string `json:"witness,omitempty"`
}

// logCheck checks one node's log for a run.
type logCheck struct {
	c    *Client
	node string       // publicUrl
	keys keys.History // the node JWKS with its rotation statements (T13)
	path string
}

func newLogCheck(c *Client, node string, h keys.History, dir string) *logCheck {
	return &logCheck{c: c, node: strings.TrimRight(node, "/"), keys: h, path: filepath.Join(dir, logsFile)}
}

func (lc *logCheck) load() (*logState, error) {
	st := &logState{Nodes: map[string]*nodeLog{}}
	data, err := os.ReadFile(lc.path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", lc.path, err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s is unreadable: %w", lc.path, err)
	}
	if st.Nodes == nil {
		st.Nodes = map[string]*nodeLog{}
	}
	return st, nil
}

func (lc *logCheck) save(st *logState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(lc.path), 0o700); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(lc.path, data, 0o600)
}

// held is the node's entry (made when absent); a distrusted node is its evidence.
func (lc *logCheck) held(st *logState) (*nodeLog, error) {
	n := st.Nodes[lc.node]
	if n == nil {
		n = &nodeLog{}
		st.Nodes[lc.node] = n
	}
	if n.Distrusted != nil {
		return nil, n.Distrusted
	}
	return n, nil
}

// HeldCheckpoint is the newest checkpoint of node's log the agent in dir has seen ("" if none):
// what it hands a peer to compare (`aether agent --peer-checkpoint`).
func HeldCheckpoint(dir, node string) (string, error) {
	lc := newLogCheck(nil, node, keys.History{}, dir)
	st, err := lc.load()
	if err != nil {
		return "", err
	}
	if n := st.Nodes[lc.node]; n != nil {
		return n.Checkpoint, nil
	}
	return "", nil
}

// before refuses a distrusted node, and compares a peer's checkpoint of the node's log, when
// given, with the one held (the gossip step, L2).
func (lc *logCheck) before(ctx context.Context, peer []byte) error {
	st, err := lc.load()
	if err != nil {
		return err
	}
	if _, err := lc.held(st); err != nil {
		return err
	}
	if len(peer) == 0 {
		return nil
	}
	if _, err := receipts.OpenCheckpointOf(peer, lc.keys, ""); err != nil {
		return fmt.Errorf("the peer's checkpoint: %w", err)
	}
	return lc.observe(ctx, st, peer)
}

// answer checks an answer's receipt against the log: its proof, then the checkpoint it names
// against the one held (L1–L4).
func (lc *logCheck) answer(ctx context.Context, proof, jws string, seq int64) (receipts.Checkpoint, error) {
	if proof == "" {
		return receipts.Checkpoint{}, fmt.Errorf("the receipt %d came without its tlog-proof in the node's log", seq)
	}
	cp, err := receipts.VerifyProof(proof, jws, seq, lc.keys.Set)
	if err != nil {
		return receipts.Checkpoint{}, fmt.Errorf("the receipt's log proof: %w", err)
	}
	st, err := lc.load()
	if err != nil {
		return cp, err
	}
	if _, err := lc.held(st); err != nil {
		return cp, err
	}
	p, _ := receipts.ParseProof(proof)
	return cp, lc.observe(ctx, st, p.Checkpoint)
}

// observe checks a signed checkpoint of the node's log against the one held, keeps the newer
// one, and distrusts the node on a contradiction.
func (lc *logCheck) observe(ctx context.Context, st *logState, got []byte) error {
	n, _ := lc.held(st)
	newest, err := lc.reconcile(ctx, n.Checkpoint, got)
	var le *LogError
	if errors.As(err, &le) {
		le.Node, le.At = lc.node, time.Now().UTC()
		n.Distrusted = le
		if serr := lc.save(st); serr != nil {
			return errors.Join(err, serr)
		}
		return err
	}
	if err != nil {
		return err
	}
	n.Checkpoint = newest
	return lc.save(st)
}

// reconcile returns the newest of held and got once they are shown to be one log's views, or
// a *LogError naming the contradiction.
func (lc *logCheck) reconcile(ctx context.Context, held string, got []byte) (string, error) {
	g, err := receipts.OpenCheckpointOf(got, lc.keys, "")
	if err != nil {
		return "", err
	}
	if held == "" {
		return string(got), nil
	}
	h, err := receipts.OpenCheckpointOf([]byte(held), lc.keys, "")
	if err != nil {
		return "", fmt.Errorf("the checkpoint held for %s: %w", lc.node, err)
	}
	if g.Origin != h.Origin {
		return "", &LogError{Reason: fmt.Sprintf("its key signed checkpoints of two logs, %q and %q", h.Origin, g.Origin), Held: held, Got: string(got)}
	}
	small, big, smallNote, bigNote := h, g, held, string(got)
	if g.Size < h.Size {
		small, big, smallNote, bigNote = g, h, string(got), held
	}
	err = lc.consistent(ctx, small, big)
	if errors.Is(err, errTiles) {
		// The node cannot show the tree of a checkpoint it signed: is it still that large?
		return "", lc.shrank(ctx, big, bigNote, err)
	}
	if err != nil {
		return "", &LogError{Reason: err.Error(), Held: smallNote, Got: bigNote}
	}
	return bigNote, nil
}

// shrank fetches the node's current checkpoint after its tiles failed (tilesErr): one smaller
// than big, which it signed, is a contradiction; otherwise tilesErr stands.
func (lc *logCheck) shrank(ctx context.Context, big receipts.Checkpoint, bigNote string, tilesErr error) error {
	latest, err := lc.c.get(ctx, lc.node+"/log/checkpoint", "the node's log checkpoint")
	if err != nil {
		return errors.Join(tilesErr, err)
	}
	l, err := receipts.OpenCheckpointOf(latest, lc.keys, big.Origin)
	if err != nil {
		return fmt.Errorf("the node's log checkpoint: %w", err)
	}
	if l.Size < big.Size {
		return &LogError{Reason: fmt.Sprintf("it signed a log of %d receipts and now serves one of %d: its log shrank (rolled back) or forked", big.Size, l.Size),
			Held: bigNote, Got: string(latest)}
	}
	return tilesErr
}

// errTiles marks a failure to read the node's tiles, which proves nothing against it.
var errTiles = errors.New("the node's log tiles")

// consistent checks that small is a prefix of big (big.Size ≥ small.Size) with a consistency
// proof built from the node's tiles, which are checked against big's root as they are read.
// A failure to fetch comes back wrapped in errTiles; anything else is a contradiction.
func (lc *logCheck) consistent(ctx context.Context, small, big receipts.Checkpoint) error {
	if small.Size == big.Size {
		if small.Root != big.Root {
			return fmt.Errorf("it signed two different logs of %d receipts: forked, or an old receipt rewritten", big.Size)
		}
		return nil
	}
	hr := tlog.TileHashReader(tlog.Tree{N: big.Size, Hash: big.Root}, &tileFetcher{ctx: ctx, c: lc.c, base: lc.node + "/log/"})
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

// checkAnswerLog is the log check of a run's answer (logCheck.answer), said in words.
func checkAnswerLog(ctx context.Context, lc *logCheck, out Outcome, seq int64, say func(string, ...any)) (*receipts.Checkpoint, error) {
	cp, err := lc.answer(ctx, out.ReceiptProof, out.ReceiptJWS, seq)
	if err != nil {
		return nil, err
	}
	say("      in the node's log %s (checkpoint of %d receipts, signed), consistent with every checkpoint seen before.", cp.Origin, cp.Size)
	return &cp, nil
}
