package runner

import (
	"encoding/json"
	"github.com/dotlab/dotlab"
	"io"
	"strings"
	"sync"
	"time"
)

// LogEntry is one line of logs.jsonl (docs/protocol.md §6 "Logs"): time (RFC 3339,
// UTC), level (info|warn|error), step (run|inputs|environment|code|execute|
// outputs|results|compare|outcome), a message and structured data.
type LogEntry struct {
	T     string         `json:"t"`
	Level string         `json:"level"`
	Step  string         `json:"step"`
	Msg   string         `json:"msg"`
	Data  map[string]any `json:"data"`
}

// Log writes LogEntry lines to w, timestamped by clock, and hands each entry
// to echo (may be nil) for a human-readable view. Safe for concurrent use.
type Log struct {
	mu    sync.Mutex
	w     io.Writer
	clock dotlab.Clock
	echo  func(LogEntry)
	err   error
}

// NewLog returns a Log writing JSON lines to w.
func NewLog(w io.Writer, clock dotlab.Clock, echo func(LogEntry)) *Log {
	return &Log{w: w, clock: clock, echo: echo}
}

func (l *Log) add(level, step, msg string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	e := LogEntry{T: l.clock.Now().UTC().Format(time.RFC3339Nano), Level: level, Step: step, Msg: msg, Data: data}
	line, err := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		_, err = l.w.Write(append(line, '\n'))
	}
	if err != nil && l.err == nil {
		l.err = err
	}
	if l.echo != nil {
		l.echo(e)
	}
}

// Info, Warn and Error add one entry at that level.
func (l *Log) Info(step, msg string, data map[string]any)  { l.add("info", step, msg, data) }
func (l *Log) Warn(step, msg string, data map[string]any)  { l.add("warn", step, msg, data) }
func (l *Log) Error(step, msg string, data map[string]any) { l.add("error", step, msg, data) }

// Err is the first write error, if any.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// tailBuffer keeps the first and last max/2 bytes written to it and counts the rest.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	head  []byte
	tail  []byte
	total int64
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	written := len(p)
	b.total += int64(len(p))
	half := b.max / 2
	if room := half - len(b.head); room > 0 {
		n := min(room, len(p))
		b.head = append(b.head, p[:n]...)
		p = p[n:]
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > half {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-half:]...)
	}
	return written, nil
}

// String is the kept text, with a marker where bytes were dropped. A NUL
// byte is shown as U+FFFD: the text goes into logs.jsonl and notes, and a
// server accepts no NUL in any text (docs/protocol.md §6 "Logs").
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := int64(len(b.head) + len(b.tail))
	s := string(b.head) + string(b.tail)
	if kept < b.total {
		s = string(b.head) + "\n[… " + itoa(b.total-kept) + " bytes dropped …]\n" + string(b.tail)
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

func itoa(n int64) string {
	s, _ := json.Marshal(n)
	return string(s)
}

// capBuffer keeps the first max bytes written to it (a stream a target
// source reads, docs/manifest-spec.md "targets[].source") and notes
// whether more came.
type capBuffer struct {
	mu   sync.Mutex
	max  int
	data []byte
	over bool
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := b.max - len(b.data); room < len(p) {
		b.over = true
		p = p[:max(room, 0)]
	}
	b.data = append(b.data, p...)
	return n, nil // all of p is taken: the rest is dropped, never refused
}
