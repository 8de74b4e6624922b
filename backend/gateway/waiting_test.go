package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestRefusingWriter: what the gate refuses is the whole answer, even where a2a-go has set a
// stream's headers already; what it lets through goes out unchanged (K2).
func TestRefusingWriter(t *testing.T) {
	t.Run("K2 a refusal replaces the stream a2a-go began", func(t *testing.T) {
		rec := httptest.NewRecorder()
		w := &refusingWriter{ResponseWriter: rec, b: bindingJSONRPC}
		ctx := withRefusals(context.Background(), w)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.Flush() // held: a refusal may still come
		if rec.Flushed {
			t.Fatal("flushed before the first byte")
		}
		err := refuse(ctx, errBusy.with("this agent already has 10 tasks waiting"), 90*time.Second+time.Millisecond)
		if err == nil {
			t.Fatal("refuse returned no error for a2a-go")
		}
		w.Write([]byte("data: {\"error\": …}\n\n"))
		w.finish()
		var body struct {
			Error struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q: %v", rec.Body.String(), err)
		}
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "91" ||
			rec.Header().Get("Content-Type") != "application/json" || body.Error.Code != -32000 || !strings.Contains(body.Error.Message, "10 tasks") {
			t.Fatalf("refusal: %d %v %s", rec.Code, rec.Header(), rec.Body.String())
		}
	})

	t.Run("K2 an answer without a refusal goes out as written", func(t *testing.T) {
		rec := httptest.NewRecorder()
		w := &refusingWriter{ResponseWriter: rec, b: bindingREST}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("data: 1\n\n"))
		w.Flush()
		// A refusal after the first byte is too late to change the answer; the error stays a2a-go's.
		if err := refuse(withRefusals(context.Background(), w), errBusy, time.Second); !strings.Contains(err.Error(), a2a.ErrServerError.Error()) {
			t.Fatalf("late refusal: %v", err)
		}
		w.Write([]byte("data: 2\n\n"))
		w.finish()
		if rec.Code != http.StatusOK || !rec.Flushed || rec.Body.String() != "data: 1\n\ndata: 2\n\n" || rec.Header().Get("Retry-After") != "" {
			t.Fatalf("passed through: %d %v %q", rec.Code, rec.Header(), rec.Body.String())
		}
	})
}
