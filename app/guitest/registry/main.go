// Command registry stands in for npm's registry in the desktop and package tests: it serves
// one platform package tarball of @openai/codex at the path the registry serves it, slowly if
// asked (so that a screenshot catches the Get Codex progress bar), and prints its address.
//
//	registry -tarball codex-0.169.0-linux-x64.tgz [-rate 40000000] [-addr-file F]
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func main() {
	tarball := flag.String("tarball", "", "the tarball to serve, named as the registry names it (codex-<version>-<platform>.tgz)")
	rate := flag.Int64("rate", 0, "bytes per second (0: as fast as it goes)")
	addrFile := flag.String("addr-file", "", "write the base URL here")
	flag.Parse()
	data, err := os.ReadFile(*tarball)
	if err != nil {
		log.Fatal(err)
	}
	path := "/@openai/codex/-/" + filepath.Base(*tarball)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(base+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("LISTEN", base)
	log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Printf("%s %s", r.Method, r.URL.Path)
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		if *rate <= 0 {
			w.Write(data)
			return
		}
		chunk := max(*rate/10, 1)
		for off := int64(0); off < int64(len(data)); off += chunk {
			if _, err := w.Write(data[off:min(off+chunk, int64(len(data)))]); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})))
}
