package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	streamErr = regexp.MustCompile(`stream ID (\d+); ([A-Z_0-9]+)`)
	goawayErr = regexp.MustCompile(`GOAWAY.*LastStreamID=(\d+), ErrCode=([A-Z_0-9]+)`)
)

// client opens every named SSE stream at once through one http.Client (net/http multiplexes
// them on one HTTP/2 connection), logs each response, event, reset and GOAWAY it sees, and
// resumes a stream that ended before event N with Last-Event-ID, up to -resume times.
func client(args []string) int {
	logPeer = "go-client"
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	base := fs.String("url", "", "base URL, https://host:port")
	ca := fs.String("ca", "", "PEM certificate to trust")
	streams := fs.String("streams", "a", "comma-separated stream names")
	n := fs.Int("n", 5, "events per stream")
	query := fs.String("query", "", "extra query parameters for /sse")
	resumes := fs.Int("resume", 0, "how many times a stream may be resumed")
	timeout := fs.Duration("timeout", 20*time.Second, "give up after")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	pem, err := os.ReadFile(*ca)
	if err != nil {
		emit("error", map[string]any{"message": fmt.Sprintf("cannot read the CA file: %v", err)})
		return 1
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		emit("error", map[string]any{"message": "no certificate in the CA file"})
		return 1
	}
	hc := &http.Client{
		Timeout: *timeout,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			ForceAttemptHTTP2: true,
		},
	}
	var wg sync.WaitGroup
	complete := true
	var mu sync.Mutex
	for _, name := range strings.Split(*streams, ",") {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			if !follow(hc, *base, name, *n, *query, *resumes) {
				mu.Lock()
				complete = false
				mu.Unlock()
			}
		}(name)
	}
	wg.Wait()
	emit("done", map[string]any{"complete": complete})
	if !complete {
		return 1
	}
	return 0
}

// follow reads one logical stream, resuming it after an early end; true if it saw event n.
func follow(hc *http.Client, base, name string, n int, query string, resumes int) bool {
	last := ""
	for attempt := 0; attempt <= resumes; attempt++ {
		url := fmt.Sprintf("%s/sse?stream=%s&n=%d", base, name, n)
		if query != "" {
			url += "&" + query
		}
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			emit("error", map[string]any{"stream": name, "message": err.Error()})
			return false
		}
		req.Header.Set("Accept", "text/event-stream")
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
			emit("resume", map[string]any{"stream": name, "last_event_id": last})
		}
		resp, err := hc.Do(req)
		if err != nil {
			logErr(name, err)
			continue
		}
		emit("response", map[string]any{"stream": name, "status": resp.StatusCode, "proto": resp.Proto})
		if resp.StatusCode == http.StatusNoContent {
			resp.Body.Close()
			return last == strconv.Itoa(n)
		}
		err = readSSE(resp.Body, last, func(ev sseEvent) {
			last = ev.id
			emit("message", map[string]any{"stream": name, "id": ev.id, "data": ev.data})
		})
		resp.Body.Close()
		if err != nil {
			logErr(name, err)
		} else {
			emit("end", map[string]any{"stream": name, "last_id": last})
		}
		if last == strconv.Itoa(n) {
			return true
		}
	}
	return false
}

// logErr logs a transport error, naming a stream reset's or a GOAWAY's code when it is one.
func logErr(name string, err error) {
	msg := err.Error()
	if m := streamErr.FindStringSubmatch(msg); m != nil {
		id, _ := strconv.Atoi(m[1])
		emit("reset", map[string]any{"stream": name, "h2_stream": id, "code": m[2], "message": msg})
		return
	}
	if m := goawayErr.FindStringSubmatch(msg); m != nil {
		id, _ := strconv.Atoi(m[1])
		emit("goaway", map[string]any{"stream": name, "last_stream": id, "code": m[2], "message": msg})
		return
	}
	emit("error", map[string]any{"stream": name, "message": msg})
}
