package cli

import (
	"fmt"
	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/termsafe"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dotlab/dotlab/runner"
	"golang.org/x/sys/unix"
)

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Progress shows long steps on one rewritten terminal line and each log
// message on its own line.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	clock dotlab.Clock
	last  time.Time
	start map[string]time.Time
	dirty bool
}

// NewProgress shows progress on w, timing rates with clock.
func NewProgress(w io.Writer, clock dotlab.Clock) *Progress { return &Progress{w: w, clock: clock} }

// Update shows done of total bytes of step what (total 0: unknown), at most
// every 100 ms and always at the end.
func (p *Progress) Update(what string, done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if p.start == nil {
		p.start = map[string]time.Time{}
	}
	if _, ok := p.start[what]; !ok {
		p.start[what] = now
	}
	if now.Sub(p.last) < 100*time.Millisecond && done != total {
		return
	}
	p.last = now
	rate := ""
	if secs := now.Sub(p.start[what]).Seconds(); secs > 0 {
		rate = fmt.Sprintf(" %.0f MB/s", float64(done)/secs/1e6)
	}
	if total > 0 {
		fmt.Fprintf(p.w, "\r\033[K%s: %3.0f%% of %.1f MB%s", termsafe.Text(what), 100*float64(done)/float64(total), float64(total)/1e6, rate)
	} else {
		fmt.Fprintf(p.w, "\r\033[K%s: %.1f MB%s", termsafe.Text(what), float64(done)/1e6, rate)
	}
	p.dirty = true
}

// Line prints one log entry on its own line.
func (p *Progress) Line(e runner.LogEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirty {
		fmt.Fprint(p.w, "\r\033[K")
		p.dirty = false
	}
	fmt.Fprintf(p.w, "%-11s %s\n", e.Step, strings.SplitN(e.Msg, "\n", 2)[0])
}
