package modelgw

import (
	"bytes"
	"encoding/json"

	"github.com/aether/aether/backend/domain"
)

// maxEventLine caps one server-sent event's data line the gateway keeps to read its usage; a
// longer line ends the turn rather than let its usage go uncounted.
const maxEventLine = 32 << 20

// usageScanner reads the usage out of a Responses stream as it passes: the response object
// of response.completed (and .incomplete, .failed) carries the upstream's own count.
type usageScanner struct {
	line     []byte
	overflow bool
}

// feed takes the next chunk of the stream and returns the usage of each event it completes.
func (s *usageScanner) feed(chunk []byte) []domain.Usage {
	var out []domain.Usage
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			s.keep(chunk)
			return out
		}
		s.keep(chunk[:i])
		if u, ok := eventUsage(s.line); ok {
			out = append(out, u)
		}
		s.line, chunk = s.line[:0], chunk[i+1:]
	}
	return out
}

func (s *usageScanner) keep(b []byte) {
	if len(s.line)+len(b) > maxEventLine {
		s.overflow = true
		return
	}
	s.line = append(s.line, b...)
}

// eventUsage decodes a `data:` line of a response.completed, .incomplete or .failed event.
func eventUsage(line []byte) (domain.Usage, bool) {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return domain.Usage{}, false
	}
	var ev struct {
		Type     string `json:"type"`
		Response struct {
			Usage *struct {
				InputTokens        int64 `json:"input_tokens"`
				OutputTokens       int64 `json:"output_tokens"`
				InputTokensDetails *struct {
					CachedTokens int64 `json:"cached_tokens"`
				} `json:"input_tokens_details"`
			} `json:"usage"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.Response.Usage == nil {
		return domain.Usage{}, false
	}
	switch ev.Type {
	case "response.completed", "response.incomplete", "response.failed":
	default:
		return domain.Usage{}, false
	}
	u := domain.Usage{InputTokens: max(ev.Response.Usage.InputTokens, 0), OutputTokens: max(ev.Response.Usage.OutputTokens, 0)}
	if d := ev.Response.Usage.InputTokensDetails; d != nil {
		u.CachedInputTokens = max(d.CachedTokens, 0)
	}
	return u, true
}
