package cli

import (
	"fmt"

	"github.com/aether/aether/backend/datadir"
)

func keysRotate(args []string, env Env) int {
	fs := newFlags("keys rotate", env)
	dir := fs.String("data-dir", "", "the node's data dir (default: the per-user data folder)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	d, err := dataDir(*dir)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether keys rotate:", err)
		return 2
	}
	oldKID, newKID, lastSeq, err := datadir.RotateKey(d)
	if err != nil {
		fmt.Fprintf(env.Stderr, "aether keys rotate: %v (stop the node first)\n", err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "Rotated the node key: %s → %s.\nThe old key stays in the JWKS so earlier receipts keep verifying, bounded to the receipts up to seq %d: nothing it signs from now on verifies. Agents refresh their delegation tokens.\n", oldKID, newKID, lastSeq)
	return 0
}
