package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodeAPIAnswersThatDoNotDecode: `aether status` and `aether grants list` read the node
// API through admin.Client, so an answer that is not owner's shape fails the verb and says
// which call and field, instead of printing zero values as the node's state.
func TestNodeAPIAnswersThatDoNotDecode(t *testing.T) {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-123" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/status":
			_, _ = w.Write([]byte(`{"gateway":{"listen":"127.0.0.1:8080","running":"yes"}}`))
		case "/v1/grants":
			_, _ = w.Write([]byte(`{"grants":[{"id":"g1","uses":"many"}]}`))
		}
	}))
	defer node.Close()
	dir := t.TempDir()
	addr := strings.TrimPrefix(node.URL, "http://")
	if err := os.WriteFile(filepath.Join(dir, "node.json"), []byte(`{"api":"`+addr+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--data-dir", dir}, `aether status: GET /v1/status: the answer does not decode as owner.Status: field "gateway.running" is a JSON string, not bool`},
		{[]string{"grants", "list", "--data-dir", dir}, `aether grants: GET /v1/grants: the answer does not decode as owner.GrantList: field "grants.uses" is a JSON string, not int64`},
	} {
		var out, errOut bytes.Buffer
		code := Main(c.args, Env{Stdout: &out, Stderr: &errOut})
		if code != 1 || !strings.Contains(errOut.String(), c.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 saying %q", c.args, code, out.String(), errOut.String(), c.want)
		}
	}
}
