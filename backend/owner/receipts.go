package owner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
)

func storeFilter(f ReceiptFilter) (store.ReceiptFilter, error) {
	sf := store.ReceiptFilter{Agent: f.Agent, Brand: domain.BrandID(f.Brand), Status: domain.TurnStatus(f.Status), From: f.From, To: f.To, Limit: f.Limit}
	if f.Cursor != "" {
		c, err := strconv.ParseInt(f.Cursor, 10, 64)
		if err != nil || c < 0 {
			return sf, fmt.Errorf("%w: bad cursor", ErrInvalid)
		}
		sf.Cursor = c
	}
	return sf, nil
}

// Receipts returns one page of receipts, newest first. ErrInvalid for a bad cursor.
func (s *Service) Receipts(ctx context.Context, f ReceiptFilter) (ReceiptPage, error) {
	sf, err := storeFilter(f)
	if err != nil {
		return ReceiptPage{}, err
	}
	recs, next, err := s.cfg.Ledger.List(ctx, sf)
	if err != nil {
		return ReceiptPage{}, err
	}
	page := ReceiptPage{Receipts: make([]ReceiptSummary, 0, len(recs))}
	for i := range recs {
		page.Receipts = append(page.Receipts, receiptDTO(&recs[i]))
	}
	if next > 0 {
		page.NextCursor = strconv.FormatInt(next, 10)
	}
	page.Log, err = s.receiptLog(ctx)
	return page, err
}

// receiptLog is the receipts log's newest checkpoint, checked, and its witnesses; nil before
// the first checkpoint.
func (s *Service) receiptLog(ctx context.Context) (*ReceiptLog, error) {
	st, ok, err := s.cfg.Ledger.LogStatus(ctx, s.cfg.Keys)
	if err != nil || !ok {
		return nil, err
	}
	l := &ReceiptLog{Origin: st.Checkpoint.Origin, Size: st.Checkpoint.Size, Root: st.Checkpoint.Root.String(), Time: st.Time,
		Verify: VerifyResult{OK: st.Problem == "", Error: st.Problem}, Witnesses: st.Witnesses, Agents: []AgentWitnesses{}}
	for _, w := range st.Agents {
		l.Agents = append(l.Agents, AgentWitnesses{Agent: agentDTO(w.Agent.Issuer, w.Agent.Subject), LastSeq: w.LastSeq, WitnessedBy: w.WitnessedBy})
	}
	return l, nil
}

// Receipt returns one receipt with its claims and whether it verifies. ErrNotFound.
func (s *Service) Receipt(ctx context.Context, id string) (ReceiptDetail, error) {
	r, err := s.cfg.Ledger.Get(ctx, id)
	if errors.Is(err, store.ErrReceiptNotFound) {
		return ReceiptDetail{}, fmt.Errorf("%w: no receipt %s", ErrNotFound, id)
	}
	if err != nil {
		return ReceiptDetail{}, err
	}
	claims, err := json.Marshal(r.Claims)
	if err != nil {
		return ReceiptDetail{}, err
	}
	d := ReceiptDetail{Receipt: receiptDTO(r), Claims: claims, JWS: r.JWS, Verify: VerifyResult{OK: true}}
	if _, err := receipts.VerifyOne(r.JWS, s.cfg.Keys); err != nil {
		d.Verify = VerifyResult{OK: false, Error: err.Error()}
	}
	return d, nil
}

// ExportReceipts writes the matching receipts as JSON Lines, oldest first, one per line.
func (s *Service) ExportReceipts(ctx context.Context, f ReceiptFilter, w io.Writer) error {
	sf, err := storeFilter(f)
	if err != nil {
		return err
	}
	sf.Oldest = true
	return s.cfg.Ledger.Export(ctx, sf, w)
}
