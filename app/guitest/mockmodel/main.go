// Command mockmodel serves backend/codex/mockmodel on loopback for the desktop and package
// tests: an OpenAI-compatible Responses server that the real codex, pointed at it from the
// Status page, asks. Each request gets the next answer; the last one repeats. It prints each
// request's bearer token as its SHA-256 only, so a test can match the key without logging it.
//
//	mockmodel -addr-file F [-answer TEXT]... [-refuse]
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aether/aether/backend/codex/mockmodel"
)

type answers []string

func (a *answers) String() string     { return fmt.Sprint(*a) }
func (a *answers) Set(s string) error { *a = append(*a, s); return nil }

func main() {
	var say answers
	flag.Var(&say, "answer", "an answer, in order (default: OK)")
	addrFile := flag.String("addr-file", "", "write the base URL (…/v1) here")
	refuse := flag.Bool("refuse", false, "answer every request 401, as the API does a wrong key")
	flag.Parse()
	var steps []mockmodel.Step
	if len(say) == 0 {
		say = answers{"OK"}
	}
	for _, s := range say {
		steps = append(steps, mockmodel.Message(s))
	}
	if *refuse {
		steps = []mockmodel.Step{mockmodel.HTTPError(http.StatusUnauthorized,
			`{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)}
	}
	srv := mockmodel.New(steps...)
	defer srv.Close()
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(srv.BaseURL()+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("LISTEN", srv.BaseURL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	tick := time.NewTicker(200 * time.Millisecond)
	seen := 0
	for {
		select {
		case <-sig:
			return
		case <-tick.C:
		}
		reqs := srv.Requests()
		for ; seen < len(reqs); seen++ {
			token := strings.TrimPrefix(reqs[seen].Header.Get("Authorization"), "Bearer ")
			sum := sha256.Sum256([]byte(token))
			fmt.Printf("REQUEST %d %s bearer-sha256=%s\n", seen+1, reqs[seen].Path, hex.EncodeToString(sum[:]))
		}
	}
}
