// Command h2sse is the Go peer of tearline's HTTP/2 tests: an SSE server and an SSE client on
// the standard library's net/http, which speaks HTTP/2 over TLS (ALPN h2) by default. Go 1.19
// (Debian 12's toolchain, fetched by tests/peers/provision.sh) has no h2c without
// golang.org/x/net, so this peer speaks h2 over TLS only.
//
// Both log what they saw as JSON lines on stdout, one object per line with an "event" key
// (see log.go); the tests judge every outcome against these lines.
//
// Usage:
//
//	h2sse server -cert CERT -key KEY
//	h2sse client -url URL -ca CA -streams a,b -n N [-resume K]
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: h2sse server|client [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "server":
		os.Exit(server(os.Args[2:]))
	case "client":
		os.Exit(client(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "h2sse: unknown command %q: expected server or client\n", os.Args[1])
		os.Exit(2)
	}
}
