package node

import "context"

// keepHead records the receipt chain's head in receipts.head (every few seconds).
func (n *Node) keepHead(ctx context.Context) {
	if err := n.head.Save(ctx, n.ledger); err != nil && ctx.Err() == nil {
		n.log.Warn("could not record the receipts head", "err", err)
	}
}
