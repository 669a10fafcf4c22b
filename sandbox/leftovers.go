package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// Leftovers lists what a finished run id left on the host: a container the
// runtime still knows, cgroup directories (every cgroup v1 hierarchy and the
// unified one) or mounts whose path names the id. Empty means clean; tests and
// `dotlab rerun` use it to prove a run left nothing behind.
func (r Runtime) Leftovers(id string) []string {
	var left []string
	if st := r.status(id); st != "" {
		left = append(left, "container "+id+" ("+st+")")
	}
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	hier = append(hier, "/sys/fs/cgroup")
	for _, h := range hier {
		p := filepath.Join(h, cgroupsParent(id))
		if _, err := os.Stat(p); err == nil {
			left = append(left, "cgroup "+p)
		}
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, id) {
				left = append(left, "mount "+line)
			}
		}
	}
	return left
}
