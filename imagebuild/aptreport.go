package imagebuild

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"sync"

	"github.com/dotlab/dotlab/internal/lazyre"
)

// aptUnknown matches apt's refusal of a package its mirror does not have
// ("E: Unable to locate package python3-scikit-learn"), and of a pinned
// version it does not have ("E: Version '1.2' for 'python3-x' was not found").
var aptUnknown = lazyre.New(`E: (?:Unable to locate package ([a-z0-9][a-z0-9+.-]*)|Version '([^']{1,100})' for '([a-z0-9][a-z0-9+.-]*)' was not found)`)

// aptWatch reads a build's output as it streams (an io.Writer beside the
// build log) and keeps the packages apt said its mirror lacks: at most
// maxAptReported, from lines of at most maxAptLine bytes (a longer
// line is skipped).
type aptWatch struct {
	mu      sync.Mutex
	partial []byte
	missing []aptMiss
}

type aptMiss struct{ name, version string }

const (
	maxAptReported = 32
	maxAptLine     = 4 << 10
)

func (a *aptWatch) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	data := append(a.partial, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		a.line(data[:i])
		data = data[i+1:]
	}
	if len(data) > maxAptLine {
		data = nil
	}
	a.partial = append([]byte(nil), data...)
	return len(p), nil
}

func (a *aptWatch) line(l []byte) {
	if len(l) > maxAptLine || len(a.missing) >= maxAptReported {
		return
	}
	m := aptUnknown().FindSubmatch(l)
	switch {
	case m == nil:
	case len(m[1]) > 0:
		a.missing = append(a.missing, aptMiss{name: string(m[1])})
	default:
		a.missing = append(a.missing, aptMiss{name: string(m[3]), version: string(m[2])})
	}
}

// report names, for each package apt could not find, its apt.txt line
// (aptTxt is the file as read; 0 when no line names it): "apt.txt line 1:
// python3-scikit-learn: no such package in the mirror". "" when apt named
// none.
func (a *aptWatch) report(aptTxt []byte) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	seen := map[aptMiss]bool{}
	for _, m := range a.missing {
		if seen[m] {
			continue
		}
		seen[m] = true
		where := "apt.txt"
		if n := aptTxtLine(aptTxt, m.name); n > 0 {
			where = fmt.Sprintf("apt.txt line %d", n)
		}
		if m.version != "" {
			out = append(out, fmt.Sprintf("%s: %s=%s: no such version in the mirror (pin a version the mirror has, or none)", where, m.name, m.version))
		} else {
			out = append(out, fmt.Sprintf("%s: %s: no such package in the mirror (check the name: apt-cache search, or packages.debian.org for the base's suite)", where, m.name))
		}
	}
	return strings.Join(out, "\n")
}

// aptTxtLine is the 1-based line of aptTxt naming package name (NAME or
// NAME=VERSION, comments after #), 0 when none does.
func aptTxtLine(aptTxt []byte, name string) int {
	sc := bufio.NewScanner(bytes.NewReader(aptTxt))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		for _, w := range strings.Fields(line) {
			if w == name || strings.HasPrefix(w, name+"=") {
				return n
			}
		}
	}
	return 0
}
