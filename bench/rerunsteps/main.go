// Command rerunsteps measures a trivial `dotlab rerun` (busybox image,
// cached; one 4-byte file:// dataset; a local git repository; results.json
// echoed), the whole command as a process, against bare `runc run` of
// /bin/true on the same rootfs, interleaved in every repetition, and splits
// each rerun into its steps from the timestamps of its logs.jsonl:
//
//	start    process start to the "rerun started" line (exec, Go runtime and
//	         package init, flags, manifest, opening the caches)
//	checks   to the first input check (runtime version, scratch directory)
//	inputs   the dataset fetched and hashed
//	prepare  image resolved, rootfs found, code checked out
//	execute  the sandbox: bundle, runc run, output walk
//	finish   results, comparison, run.json, to the process's exit
//
// With -before BIN, an older dotlab is measured alongside (its own cache).
//
// Usage (root; runc, busybox-static, git): go run ./bench/rerunsteps -dotlab BIN [-before BIN] [-n 20]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	bin := flag.String("dotlab", "", "dotlab binary to measure (required)")
	before := flag.String("before", "", "an older dotlab binary measured alongside")
	n := flag.Int("n", 20, "repetitions")
	flag.Parse()
	if err := run(*bin, *before, *n); err != nil {
		fmt.Fprintln(os.Stderr, "rerunsteps:", err)
		os.Exit(1)
	}
}

var stepNames = []string{"start", "checks", "inputs", "prepare", "execute", "finish"}

type build struct {
	name, path, cache string
	total             []time.Duration
	cpu               []time.Duration // user + system of the process and its children
	steps             map[string][]time.Duration
}

// cpuOf is the user + system time of a finished command (its children included).
func cpuOf(st *os.ProcessState) time.Duration { return st.UserTime() + st.SystemTime() }

func run(bin, before string, n int) error {
	if bin == "" {
		return fmt.Errorf("give -dotlab BIN")
	}
	work, err := os.MkdirTemp("", "rerunsteps-")
	if err != nil {
		return err
	}
	if os.Getenv("RERUNSTEPS_KEEP") == "" {
		defer os.RemoveAll(work)
	}
	defer removeCgroups()
	builds := []*build{{name: "dotlab", path: bin}}
	if before != "" {
		builds = append(builds, &build{name: "before", path: before})
	}
	manifest, rootfs, err := setup(work, bin)
	if err != nil {
		return err
	}
	// One cache for all builds (its image and rootfs; an older build ignores
	// runtime-version.json). runc refuses a rootfs path through a symbolic
	// link, so the path is the directory itself.
	for _, b := range builds {
		b.cache, b.steps = filepath.Join(work, "cache"), map[string][]time.Duration{}
	}
	bundle, err := bareBundle(work, rootfs)
	if err != nil {
		return err
	}
	var bare, bareCPU []time.Duration
	for i := 0; i < n+1; i++ { // the first repetition warms up and is not counted
		for _, b := range builds {
			if err := b.once(work, manifest, i, i > 0); err != nil {
				return err
			}
		}
		start := time.Now()
		cmd := exec.Command("runc", "--root", filepath.Join(work, "state"), "run", "--bundle", bundle, fmt.Sprintf("bare-%d", i))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("runc run: %v: %s", err, out)
		}
		if i > 0 {
			bare = append(bare, time.Since(start))
			bareCPU = append(bareCPU, cpuOf(cmd.ProcessState))
		}
	}
	report(builds, bare, bareCPU, n)
	return nil
}

// once runs one rerun and records its total and step times.
func (b *build) once(work, manifest string, i int, count bool) error {
	out := filepath.Join(work, fmt.Sprintf("out-%s-%d", b.name, i))
	start := time.Now()
	cmd := exec.Command(b.path, "rerun", manifest, "--allow-local", work, "--cache", b.cache, "--out", out)
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s rerun: %v: %s", b.name, err, o)
	}
	end := time.Now()
	marks, err := logMarks(filepath.Join(out, "logs.jsonl"))
	if err != nil {
		return err
	}
	if run, err := os.ReadFile(filepath.Join(out, "run.json")); err != nil || !strings.Contains(string(run), `"outcome": "reproduced"`) {
		return fmt.Errorf("%s rerun: not reproduced (see %s/logs.jsonl): %v", b.name, out, err)
	}
	if !count {
		return nil
	}
	b.total = append(b.total, end.Sub(start))
	b.cpu = append(b.cpu, cpuOf(cmd.ProcessState))
	bounds := append(append([]time.Time{start}, marks...), end)
	for k, name := range stepNames {
		b.steps[name] = append(b.steps[name], bounds[k+1].Sub(bounds[k]))
	}
	return nil
}

// logMarks reads the times that end the steps start..execute from
// logs.jsonl: "rerun started", the first inputs line, the first execute
// line, the outcome line... in the order stepNames needs.
func logMarks(path string) ([]time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var started, firstInput, lastInput, executeStart, executeEnd time.Time
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			T    time.Time `json:"t"`
			Step string    `json:"step"`
			Msg  string    `json:"msg"`
			Data struct {
				Seconds float64 `json:"seconds"`
			} `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, err
		}
		switch {
		case e.Step == "run" && started.IsZero():
			started = e.T
		case e.Step == "inputs":
			if firstInput.IsZero() {
				// The line is written when the dataset is verified; its
				// check began Seconds before.
				firstInput = e.T.Add(-time.Duration(e.Data.Seconds * float64(time.Second)))
			}
			lastInput = e.T
		case e.Step == "execute" && executeStart.IsZero():
			executeStart = e.T
		case e.Step == "execute" && strings.HasPrefix(e.Msg, "command exited"):
			executeEnd = e.T
		}
	}
	for _, t := range []time.Time{started, firstInput, lastInput, executeStart, executeEnd} {
		if t.IsZero() {
			return nil, fmt.Errorf("%s: a step is missing", path)
		}
	}
	return []time.Time{started, firstInput, lastInput, executeStart, executeEnd}, sc.Err()
}

func report(builds []*build, bare, bareCPU []time.Duration, n int) {
	fmt.Printf("%d repetitions, interleaved; medians (min–max), ms\n\n", n)
	fmt.Printf("| step |")
	for _, b := range builds {
		fmt.Printf(" %s |", b.name)
	}
	fmt.Printf("\n|---|%s\n", strings.Repeat("---:|", len(builds)))
	for _, s := range stepNames {
		fmt.Printf("| %s |", s)
		for _, b := range builds {
			fmt.Printf(" %s |", spread(b.steps[s]))
		}
		fmt.Println()
	}
	fmt.Printf("| **whole `dotlab rerun`** |")
	for _, b := range builds {
		fmt.Printf(" **%s** |", spread(b.total))
	}
	fmt.Printf("\n| bare `runc run` /bin/true, same rootfs | %s |\n", spread(bare))
	fmt.Printf("| CPU (user + system): `dotlab rerun` |")
	for _, b := range builds {
		fmt.Printf(" %s |", spread(b.cpu))
	}
	fmt.Printf("\n| CPU: bare `runc run` | %s |\n", spread(bareCPU))
	for _, b := range builds {
		fmt.Printf("| %s / bare runc (medians) | wall %.2fx, CPU %.2fx (goal <= 2x) |\n", b.name,
			ms(median(b.total))/ms(median(bare)), ms(median(b.cpu))/ms(median(bareCPU)))
	}
	fmt.Printf("load average after: %s\n", loadavg())
}

func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f (%.1f–%.1f)", ms(median(ds)), ms(slices.Min(ds)), ms(slices.Max(ds)))
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// setup makes the busybox rootfs image, the dataset, the repository and the
// manifest with bench/trivial-claim.sh, as bench/run.sh does; it returns the manifest and the unpacked rootfs.
func setup(work, bin string) (manifest, rootfs string, err error) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return "", "", fmt.Errorf("busybox-static is needed: %w", err)
	}
	// Run from the repository root, as bench/README.md says.
	out, err := exec.Command("bash", filepath.Join("bench", "trivial-claim.sh"), work, bin, bb).Output()
	if err != nil {
		return "", "", fmt.Errorf("setup: %w", err)
	}
	digest := strings.TrimSpace(string(out))
	return filepath.Join(work, "m.json"), filepath.Join(work, "cache", "images", "rootfs", "sha256", strings.TrimPrefix(digest, "sha256:")), nil
}

// bareBundle is a runc-spec style bundle (read-only root, /proc, /dev; no
// seccomp, no limits) running /bin/true on rootfs, as bench/run.sh writes.
func bareBundle(work, rootfs string) (string, error) {
	dir := filepath.Join(work, "bundle")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`{"ociVersion":"1.0.2","process":{"user":{"uid":1000,"gid":1000},"args":["/bin/true"],"env":["PATH=/bin"],"cwd":"/",
 "rlimits":[{"type":"RLIMIT_NOFILE","hard":1024,"soft":1024}],"noNewPrivileges":true},
 "root":{"path":%q,"readonly":true},"hostname":"bare",
 "mounts":[{"destination":"/proc","type":"proc","source":"proc"},{"destination":"/dev","type":"tmpfs","source":"tmpfs","options":["nosuid","mode=755"]}],
 "linux":{"cgroupsPath":"/dotlab-bench/steps","namespaces":[{"type":"pid"},{"type":"network"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]}}`, rootfs)
	return dir, os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644)
}

func removeCgroups() {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/dotlab-bench")
	for _, d := range dirs {
		os.Remove(d)
	}
}
