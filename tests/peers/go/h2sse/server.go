package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// server serves numbered SSE events over HTTPS (h2 by ALPN) on 127.0.0.1, port 0:
// GET /sse?stream=NAME&n=N&interval=MS&first_delay=MS&size=BYTES&split=MS sends events id 1..N
// (after the request's Last-Event-ID, if any), then ends the stream; a request whose
// Last-Event-ID is already N gets 204 (nothing left: an EventSource stops there). With split,
// each event goes in two writes (two DATA frames) split ms apart, torn inside its data value.
func server(args []string) int {
	logPeer = "go-server"
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	cert := fs.String("cert", "", "PEM certificate chain")
	key := fs.String("key", "", "PEM private key")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		emit("error", map[string]any{"message": fmt.Sprintf("cannot load the certificate: %v", err)})
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		emit("error", map[string]any{"message": err.Error()})
		return 1
	}
	srv := &http.Server{
		Handler:   http.HandlerFunc(serveSSE),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2", "http/1.1"}},
	}
	emit("listening", map[string]any{"port": ln.Addr().(*net.TCPAddr).Port, "proto": "h2"})
	if err := srv.ServeTLS(ln, "", ""); err != nil {
		emit("error", map[string]any{"message": err.Error()})
		return 1
	}
	return 0
}

func intParam(r *http.Request, name string, def int) int {
	if v, err := strconv.Atoi(r.URL.Query().Get(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

func serveSSE(w http.ResponseWriter, r *http.Request) {
	stream := r.URL.Query().Get("stream")
	n := intParam(r, "n", 5)
	interval := time.Duration(intParam(r, "interval", 20)) * time.Millisecond
	firstDelay := time.Duration(intParam(r, "first_delay", 0)) * time.Millisecond
	size := intParam(r, "size", 0)
	split := time.Duration(intParam(r, "split", 0)) * time.Millisecond
	splitting := r.URL.Query().Has("split")
	last := r.Header.Get("Last-Event-ID")
	from := 1
	if v, err := strconv.Atoi(last); err == nil {
		from = v + 1
	}
	emit("request", map[string]any{"path": r.URL.Path, "stream": stream, "proto": r.Proto, "last_event_id": last})
	if r.URL.Path != "/sse" {
		http.NotFound(w, r)
		return
	}
	if from > n {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no flush", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	pad := make([]byte, size)
	for i := range pad {
		pad[i] = 'x'
	}
	ctx := r.Context()
	for i := from; i <= n; i++ {
		wait := interval
		if i == from {
			wait = firstDelay
		}
		select {
		case <-ctx.Done():
			emit("cancelled", map[string]any{"stream": stream, "next_id": i, "cause": ctx.Err().Error()})
			return
		case <-time.After(wait):
		}
		ev := fmt.Sprintf("id: %d\ndata: {\"stream\":%q,\"n\":%d,\"pad\":%q}\n\n", i, stream, i, pad)
		parts := []string{ev}
		if splitting {
			cut := strings.Index(ev, `"pad":"`) + 7 + size/2
			parts = []string{ev[:cut], ev[cut:]}
		}
		for k, part := range parts {
			if k > 0 {
				select {
				case <-ctx.Done():
					emit("cancelled", map[string]any{"stream": stream, "next_id": i, "cause": ctx.Err().Error()})
					return
				case <-time.After(split):
				}
			}
			if _, err := w.Write([]byte(part)); err != nil {
				emit("cancelled", map[string]any{"stream": stream, "next_id": i, "cause": err.Error()})
				return
			}
			flusher.Flush()
		}
	}
	emit("end", map[string]any{"stream": stream, "last_id": n})
}
