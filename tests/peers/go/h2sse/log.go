package main

import (
	"encoding/json"
	"os"
	"sync"
	"time"
)

var (
	logMu    sync.Mutex
	logStart = time.Now()
	logPeer  string
)

// emit writes one JSON line: the fields given plus "peer", "event" and "t_ms" (milliseconds
// since the process started).
func emit(event string, fields map[string]any) {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["peer"] = logPeer
	fields["event"] = event
	fields["t_ms"] = time.Since(logStart).Milliseconds()
	line, err := json.Marshal(fields)
	if err != nil {
		line = []byte(`{"event":"error","message":"cannot encode a log line"}`)
	}
	logMu.Lock()
	defer logMu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}
