package gateway

import (
	"errors"
	"net/http"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/receipts"
)

// The receipts log, read-only, as C2SP tlog-tiles at <publicUrl>/log/ (docs/wire.md, "The
// receipts log"): checkpoint, tile/<L>/<N>[.p/<W>] and tile/entries/<N>[.p/<W>].

// maxLogRequestsPerClient caps one client's log requests in progress: an entry bundle is
// up to 256 receipts read from the store.
const maxLogRequestsPerClient = 8

func (g *Gateway) serveLog(w http.ResponseWriter, r *http.Request) {
	who := clientAddr(r, g.routes.Load().proxies)
	if !g.logs.Take(who) {
		setRetryAfter(w, busyRetry)
		http.Error(w, "too many log requests in progress from this address", http.StatusTooManyRequests)
		return
	}
	defer g.logs.Release(who)
	path := strings.TrimPrefix(r.URL.Path, "/log/")
	if path == "checkpoint" {
		g.serveCheckpoint(w, r)
		return
	}
	t, ok := parseTile(path)
	if !ok {
		http.Error(w, "no such log resource: /log/checkpoint, /log/tile/<L>/<N>[.p/<W>] or /log/tile/entries/<N>[.p/<W>]", http.StatusNotFound)
		return
	}
	data, err := g.cfg.Ledger.Tile(r.Context(), t)
	if errors.Is(err, receipts.ErrNoTile) {
		http.Error(w, "that tile is not in the log's newest checkpoint", http.StatusNotFound)
		return
	}
	if err != nil {
		g.cfg.Logger.Error("log tile", "path", path, "err", err)
		http.Error(w, "the log could not be read", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if t.W == 1<<receipts.TileHeight { // a full tile never changes
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "public, max-age=60")
	}
	w.Write(data)
}

func (g *Gateway) serveCheckpoint(w http.ResponseWriter, r *http.Request) {
	note, ok, err := g.cfg.Ledger.LatestCheckpoint(r.Context())
	if err != nil {
		g.cfg.Logger.Error("log checkpoint", "err", err)
		http.Error(w, "the log could not be read", http.StatusInternalServerError)
		return
	}
	if !ok {
		http.Error(w, "the log has no checkpoint yet: no receipt was signed", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=5")
	w.Write(note)
}

// parseTile reads a C2SP tile path (tile/<L>/<N>[.p/<W>], tile/entries/<N>[.p/<W>]) through
// tlog's own parser, which takes the tile height in the path and names entries "data".
func parseTile(path string) (tlog.Tile, bool) {
	rest, ok := strings.CutPrefix(path, "tile/")
	if !ok {
		return tlog.Tile{}, false
	}
	if strings.HasPrefix(rest, "data/") {
		return tlog.Tile{}, false // only the C2SP spelling, entries
	}
	if e, ok := strings.CutPrefix(rest, "entries/"); ok {
		rest = "data/" + e
	}
	t, err := tlog.ParseTilePath("tile/8/" + rest)
	if err != nil {
		return tlog.Tile{}, false
	}
	return t, true
}
