package agent

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
)

// maxPlainAnswer bounds the plain answer to a streaming call that StreamAnswers reads: a
// JSON-RPC error.
const maxPlainAnswer = 1 << 20

// StreamAnswers lets a2a-go's JSON-RPC client read every answer to a streaming call. A node
// whose stream fails before its first event answers with the plain JSON-RPC error, as
// application/json (A2A 1.0 §11.6; docs/wire.md, "Streams"); a2a-go v2.4.0 reads any answer
// to a streaming call as an event stream, and would see that one as a stream that ended well,
// with no event and no error. StreamAnswers hands it the answer as the stream's one event.
func StreamAnswers(rt http.RoundTripper) http.RoundTripper { return streamAnswers{base: rt} }

type streamAnswers struct{ base http.RoundTripper }

func (t streamAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := base(t.base).RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(req.Header.Get("Accept"), "text/event-stream") {
		return resp, err
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" {
		return resp, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxPlainAnswer))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var line bytes.Buffer
	if json.Compact(&line, data) != nil { // not JSON: a2a-go says it cannot parse the event
		line.Reset()
		line.Write(bytes.ReplaceAll(data, []byte("\n"), []byte(" ")))
	}
	event := "data: " + line.String() + "\n\n" // one line, as an SSE data field must be
	resp.Header.Set("Content-Type", "text/event-stream")
	resp.Header.Del("Content-Length")
	resp.ContentLength = int64(len(event))
	resp.Body = io.NopCloser(strings.NewReader(event))
	return resp, nil
}
