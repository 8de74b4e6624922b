package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aether/aether/backend/datadir"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/receipts"
)

// dataDirFlag resolves --data-dir with the same default as the node.
func dataDir(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	return datadir.Default()
}

func receiptsVerify(args []string, env Env) int {
	fs := newFlags("receipts verify", env)
	dir := fs.String("data-dir", "", "the node's data dir (default: the per-user data folder)")
	in := fs.String("in", "", "verify an exported JSON Lines file instead of the data dir")
	jwksPath := fs.String("jwks", "", "the node JWKS (jwks.json) to verify with (default: the data dir's node key)")
	seq := fs.Int64("expect-seq", 0, "a high-water mark kept elsewhere: the receipt with this seq must be present…")
	hash := fs.String("expect-hash", "", "…and have this hash (catches a truncated tail or a rolled-back store)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx := context.Background()
	set, err := verifyKeys(*jwksPath, *dir, env)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether receipts verify:", err)
		return 2
	}
	var rep *receipts.Report
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintln(env.Stderr, "aether receipts verify:", err)
			return 2
		}
		defer f.Close()
		rep, err = datadir.VerifyExport(ctx, f, set, *seq, *hash)
		if err != nil {
			fmt.Fprintln(env.Stderr, "aether receipts verify:", err)
			return 2
		}
	} else {
		d, err := dataDir(*dir)
		if err != nil {
			fmt.Fprintln(env.Stderr, "aether receipts verify:", err)
			return 2
		}
		rs, err := datadir.OpenReceipts(d)
		if err != nil {
			fmt.Fprintln(env.Stderr, "aether receipts verify:", err)
			return 1
		}
		defer rs.Close()
		if *seq == 0 {
			// Without a mark given, the node's own (receipts.head) tells a cut tail from a short chain.
			head, path, ok, err := rs.Head()
			switch {
			case err != nil:
				fmt.Fprintln(env.Stderr, "aether receipts verify:", err)
				return 1
			case !ok:
				fmt.Fprintf(env.Stdout, "No %s: the newest receipts could have been cut without a trace; pass --expect-seq/--expect-hash from a mark kept elsewhere.\n", path)
			case head.Seq > 0:
				*seq, *hash = head.Seq, head.Hash
				fmt.Fprintf(env.Stdout, "Checking against %s: seq %d.\n", path, head.Seq)
			}
		}
		rep, err = rs.Verify(ctx, set, *seq, *hash)
		if err != nil {
			fmt.Fprintln(env.Stderr, "aether receipts verify:", err)
			return 1
		}
	}
	if !rep.OK {
		fmt.Fprintf(env.Stdout, "FAILED after %d good receipt(s): %v\n", rep.Count, rep.Problem)
		return 1
	}
	fmt.Fprintf(env.Stdout, "OK: %d receipt(s); every signature and the whole chain verify. Last: seq %d, hash %s\n", rep.Count, rep.LastSeq, rep.LastHash)
	if rep.Checkpoints > 0 {
		fmt.Fprintf(env.Stdout, "The receipts log %s, rebuilt from them, holds %d leaves; all %d checkpoint(s) the node signed verify.\n", rep.Origin, rep.LogSize, rep.Checkpoints)
	}
	if rep.Count > 0 {
		fmt.Fprintf(env.Stdout, "Keep this high-water mark elsewhere to detect a truncated tail later: --expect-seq %d --expect-hash %s\n", rep.LastSeq, rep.LastHash)
	}
	if *in == "" {
		return verifyReceived(ctx, *dir, env)
	}
	return 0
}

// verifyReceived checks again what the owner's agents received from other nodes.
func verifyReceived(ctx context.Context, dir string, env Env) int {
	d, err := dataDir(dir)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether receipts verify:", err)
		return 1
	}
	rs, err := datadir.OpenReceipts(d)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether receipts verify:", err)
		return 1
	}
	defer rs.Close()
	n, problems, err := rs.VerifyReceived(ctx)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether receipts verify:", err)
		return 1
	}
	if len(problems) > 0 {
		fmt.Fprintf(env.Stdout, "FAILED: %d of %d received receipt(s) do not verify:\n  %s\n", len(problems), n, strings.Join(problems, "\n  "))
		return 1
	}
	if n > 0 {
		fmt.Fprintf(env.Stdout, "Received: %d receipt(s) from other nodes; each signature and log proof verify with the JWKS and tlog-proof kept beside it.\n", n)
	}
	return 0
}

// verifyKeys is the keys to verify with: a JWKS file (the node's, whose retired keys carry
// their rotation statements), or the data dir's key ring (the signing key and the keys it
// replaced), whose rotation statements are checked on the way. Each statement bounds the key
// it retired (T13).
func verifyKeys(jwksPath, dir string, env Env) (keys.History, error) {
	var h keys.History
	if jwksPath != "" {
		data, err := os.ReadFile(jwksPath)
		if err != nil {
			return keys.History{}, err
		}
		if h, err = keys.ParseHistory(data); err != nil {
			return keys.History{}, err
		}
	} else {
		d, err := dataDir(dir)
		if err != nil {
			return keys.History{}, err
		}
		if h, err = datadir.VerifyingKeys(d); err != nil {
			return keys.History{}, err
		}
	}
	if n := len(h.Retired); n > 0 {
		fmt.Fprintf(env.Stdout, "Key ring: %d rotation(s), each signed by the key it retired; no receipt a retired key signed after its rotation verifies.\n", n)
	}
	return h, nil
}

func receiptsExport(args []string, env Env) int {
	fs := newFlags("receipts export", env)
	dir := fs.String("data-dir", "", "the node's data dir (default: the per-user data folder)")
	out := fs.String("out", "", "write to this file instead of standard output")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	d, err := dataDir(*dir)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether receipts export:", err)
		return 2
	}
	rs, err := datadir.OpenReceipts(d)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether receipts export:", err)
		return 1
	}
	defer rs.Close()
	var w io.Writer = env.Stdout
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			fmt.Fprintln(env.Stderr, "aether receipts export:", err)
			return 1
		}
		defer f.Close()
		w = f
	}
	if err := rs.Export(context.Background(), w); err != nil {
		fmt.Fprintln(env.Stderr, "aether receipts export:", err)
		return 1
	}
	return 0
}
