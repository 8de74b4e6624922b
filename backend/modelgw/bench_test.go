package modelgw

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPrintB7 measures the gateway's added latency to the first streamed byte: a Responses
// request through the gateway against the same request to the upstream directly, each over
// a kept-alive connection as Codex's are, taken pair by pair (make bench; never fails on a
// timing).
func TestPrintB7(t *testing.T) {
	if os.Getenv("AETHER_BENCH") == "" {
		t.Skip("benchmark: set AETHER_BENCH=1 (make bench)")
	}
	up := newFakeUpstream(t, completed(10, 5))
	clk := &clock{now: time.Now()}
	g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1", Key: testKey}, clk, 0)
	p, err := g.Open(Binding{Turn: "b7", Grant: "b7"}, clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` + strings.Repeat("x", 4<<10) + `"}]}]}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	firstByte := func(url, token string) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		if _, err := io.ReadFull(resp.Body, b[:]); err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return d
	}
	const n = 1000
	var via, direct, added []time.Duration
	for i := 0; i < n; i++ {
		v, d := firstByte(p.BaseURL+"/responses", p.Token), firstByte(up.srv.URL+"/v1/responses", testKey)
		via, direct, added = append(via, v), append(direct, d), append(added, v-d)
	}
	q := func(d []time.Duration, f float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[int(f*float64(len(s)-1))]) / float64(time.Millisecond)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		fmt.Printf("B7-%s gateway=%.3fms direct=%.3fms added=%.3fms\n", f.name, q(via, f.v), q(direct, f.v), q(added, f.v))
	}
}
