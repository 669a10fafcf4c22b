package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// row is one line of the table: a measured series, or a derived ratio.
type row struct {
	name   string
	times  []time.Duration // one per repetition (empty for a ratio row)
	ratio  float64         // for a ratio row
	goal   string          // "<= 1.2x" …; empty when the row has none
	met    bool
	detail string
}

func series(name string, times []time.Duration, detail string) row {
	return row{name: name, times: times, detail: detail}
}

func ratioRow(name string, ratio float64, goal string, met bool, detail string) row {
	return row{name: name, ratio: ratio, goal: goal, met: met, detail: detail}
}

// median of ds (the mean of the middle two for an even count).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

// printTable prints the rows as a Markdown table (medians of n, ranges).
func printTable(rows []row) {
	fmt.Println("| row | median | runs | range (s) | ratio | goal | verdict | notes |\n|---|---:|---:|---|---:|---|---|---|")
	for _, r := range rows {
		if len(r.times) > 0 {
			lo, hi := slices.Min(r.times), slices.Max(r.times)
			fmt.Printf("| %s | %s | %d | %.3f–%.3f | | | | %s |\n", r.name, secs(median(r.times)), len(r.times), lo.Seconds(), hi.Seconds(), r.detail)
			continue
		}
		verdict := ""
		if r.goal != "" {
			verdict = "MISSED"
			if r.met {
				verdict = "met"
			}
		}
		fmt.Printf("| %s | | | | **%.2fx** | %s | %s | %s |\n", r.name, r.ratio, r.goal, verdict, r.detail)
	}
}

func printMachine(c config) {
	fmt.Printf("machine: %d cores, %s, %s %s/%s, kernel %s\n", runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH, kernel())
	fmt.Printf("runc:    %s\n", firstLine("runc", "--version"))
	fmt.Printf("curl:    %s\n", firstLine("curl", "--version"))
	fmt.Printf("dotlab:  %s\n", c.dotlab)
	if c.before != "" {
		fmt.Printf("before:  %s\n", c.before)
	}
	fmt.Printf("images:  %s\n         %s\n", c.sciRef, c.pyRef)
	fmt.Printf("scratch: %s (%d repetitions)\n", c.work, c.n)
	fmt.Printf("load average before: %s (other work on the machine skews every row)\n", loadavg())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func firstLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "not found"
	}
	l, _, _ := strings.Cut(string(out), "\n")
	return l
}

// timed runs name with args (after writing back dirty pages, untimed) and
// returns how long it took; stdout is discarded, stderr kept for errors.
func timed(name string, args ...string) (time.Duration, error) {
	syscall.Sync()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	return d, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// rerun times `dotlab rerun MANIFEST` into a new out directory and reads
// back its outcome and step times.
func rerun(bin, manifest, allowLocal, cache, out string) (time.Duration, runLog, error) {
	d, err := timed(bin, "rerun", manifest, "--allow-local", allowLocal, "--cache", cache, "--out", out)
	if err != nil {
		return d, runLog{}, err
	}
	l, err := readLog(filepath.Join(out, "logs.jsonl"))
	if err == nil && l.outcome != "reproduced" {
		err = fmt.Errorf("%s: outcome %s (want reproduced); see %s", manifest, l.outcome, out)
	}
	return d, l, err
}

// runLog is what the benchmark reads from a rerun's logs.jsonl.
type runLog struct {
	outcome          string
	fetch, unpack    time.Duration // the dataset download step, the rootfs step
	execute          time.Duration // the runtime's run of the entrypoint
	rootfs           string
	datasetBytesRead int64
}

// logLine is the part of a logs.jsonl entry the benchmark reads.
type logLine struct {
	Step string `json:"step"`
	Msg  string `json:"msg"`
	Data struct {
		Seconds float64 `json:"seconds"`
		Rootfs  string  `json:"rootfs"`
		Bytes   int64   `json:"bytes"`
		Outcome string  `json:"outcome"`
	} `json:"data"`
}

func readLog(path string) (runLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return runLog{}, err
	}
	defer f.Close()
	var l runLog
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e logLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return l, fmt.Errorf("%s: %w", path, err)
		}
		sec := time.Duration(e.Data.Seconds * float64(time.Second))
		switch {
		case e.Step == "inputs" && strings.HasSuffix(e.Msg, "hash verified"):
			l.fetch += sec
			l.datasetBytesRead += e.Data.Bytes
		case e.Step == "environment" && e.Data.Rootfs != "":
			l.unpack, l.rootfs = sec, e.Data.Rootfs
		case e.Step == "execute" && strings.HasPrefix(e.Msg, "command exited"):
			l.execute = sec
		case e.Step == "outcome":
			l.outcome = e.Data.Outcome
		}
	}
	return l, sc.Err()
}

// linkTree makes dst a copy of the directory tree src whose regular files
// are hard links (the image store's blobs are immutable), so that a fresh
// cache holds the same store without copying it.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o700)
		case d.Type().IsRegular():
			return os.Link(p, target)
		}
		return nil
	})
}
