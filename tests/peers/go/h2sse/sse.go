package main

import (
	"bufio"
	"io"
	"strings"
)

// sseEvent is one dispatched event: its id (the stream's last event id after it) and data.
type sseEvent struct {
	id   string
	data string
}

// readSSE parses an event stream as the WHATWG rules say (CR, LF or CRLF line ends; id, data;
// an event dispatches on a blank line, and only then does its id become the last event id) and
// calls onEvent for each dispatched event. It returns the reader's error (nil at a clean end).
func readSSE(r io.Reader, lastID string, onEvent func(sseEvent)) error {
	br := bufio.NewReader(r)
	var data []string
	id := lastID
	haveData := false
	var line strings.Builder
	pendingCR := false
	handle := func(l string) {
		if l == "" {
			if haveData {
				onEvent(sseEvent{id: id, data: strings.Join(data, "\n")})
			}
			data, haveData = nil, false
			return
		}
		if strings.HasPrefix(l, ":") {
			return
		}
		name, value, found := strings.Cut(l, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			data = append(data, value)
			haveData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				id = value
			}
		}
	}
	for {
		b, err := br.ReadByte()
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if pendingCR {
			pendingCR = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\r':
			pendingCR = true
			handle(line.String())
			line.Reset()
		case '\n':
			handle(line.String())
			line.Reset()
		default:
			line.WriteByte(b)
		}
	}
}
