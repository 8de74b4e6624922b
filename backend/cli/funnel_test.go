package cli

import (
	"strings"
	"testing"

	"github.com/aether/aether/backend/owner"
)

// The reach line of `aether status` and `node serve` says where agents reach the node, and
// when they cannot, why and what to do.
func TestReachLine(t *testing.T) {
	for _, tc := range []struct {
		r    owner.Reachability
		want []string
	}{
		{owner.Reachability{Mode: "off"}, []string{"not reachable from the internet"}},
		{owner.Reachability{Mode: "proxy", URL: "https://node.example"}, []string{"own proxy"}},
		{owner.Reachability{Mode: "funnel", State: "logging_in", LoginURL: "https://login.example/a"}, []string{"sign in", "https://login.example/a"}},
		{owner.Reachability{Mode: "funnel", State: "failed", Reason: "no HTTPS certificates", Fix: "turn them on"}, []string{"no HTTPS certificates", "turn them on"}},
		{owner.Reachability{Mode: "funnel", State: "published", URL: "https://a.ts.net"}, []string{"published at https://a.ts.net", "not the publicUrl yet"}},
		{owner.Reachability{Mode: "funnel", State: "published", URL: "https://a.ts.net", InUse: true}, []string{"reachable at https://a.ts.net"}},
	} {
		got := reachLine(tc.r)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%+v: %q lacks %q", tc.r, got, w)
			}
		}
	}
}
