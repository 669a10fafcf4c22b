package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Every run records its owner — the dotlab process, with its start time so
// that a reused pid is not mistaken for it — and its bundle in
// <state dir>.owners/<id>.json, removed when the run has cleaned up. A run
// whose owner died without cleaning up (SIGKILL, a crash, a power cut of the
// process) leaves its record behind; Reap, called at the start of every Run,
// kills and deletes such containers and removes their cgroups, out tmpfs
// and bundles.

type owner struct {
	PID    int    `json:"pid"`
	Start  string `json:"start"` // field 22 of /proc/<pid>/stat
	Bundle string `json:"bundle"`
}

func (r Runtime) ownersDir() string { return r.stateDir() + ".owners" }

// procStart returns a process's start time in clock ticks since boot.
func procStart(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces; fields restart after ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", errors.New("malformed stat")
	}
	return f[19], nil // field 22 overall
}

// record writes this process's ownership of run id; the returned func
// removes it.
func (r Runtime) record(id, bundle string) (func(), error) {
	if err := os.MkdirAll(r.ownersDir(), 0o700); err != nil {
		return nil, err
	}
	start, err := procStart(os.Getpid())
	if err != nil {
		return nil, err
	}
	data, _ := json.Marshal(owner{PID: os.Getpid(), Start: start, Bundle: bundle})
	p := filepath.Join(r.ownersDir(), id+".json")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return nil, err
	}
	return func() { os.Remove(p) }, nil
}

// Reap cleans up after runs whose owner process is gone, and returns their
// container ids. It is safe to call concurrently with live runs: a record
// whose owner is alive is left alone.
func (r Runtime) Reap() []string {
	entries, err := os.ReadDir(r.ownersDir())
	if err != nil {
		return nil
	}
	var reaped []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !strings.HasPrefix(id, "dotlab-") {
			continue
		}
		p := filepath.Join(r.ownersDir(), e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var o owner
		if json.Unmarshal(data, &o) != nil {
			os.Remove(p)
			continue
		}
		if start, err := procStart(o.PID); err == nil && start == o.Start {
			continue // the owner is alive
		}
		r.kill(id)
		if err := r.cleanup(id); err != nil {
			continue // try again at the next run
		}
		if o.Bundle != "" && filepath.IsAbs(o.Bundle) && strings.Contains(filepath.Base(o.Bundle), id) {
			if err := cleanupBundle(o.Bundle); err != nil {
				continue
			}
		}
		os.Remove(p)
		reaped = append(reaped, id)
	}
	return reaped
}
