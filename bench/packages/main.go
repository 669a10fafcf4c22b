// Command packages benchmarks reruns of real replication packages (issue
// "Real replication packages, rerun as they were published", Must show),
// side by side with bare baselines measured in the same run:
//
//   - sandbox: `dotlab rerun` of examples/claims/longley-1967 (the Python
//     package example on the python-sci image, unpacked and cached) against
//     the same command (`python3 analysis.py` in a writable copy of the code)
//     run by a bare `runc run` of a hand-written bundle on the same rootfs;
//     goal <= 1.2x.
//   - unpack: the first rerun of that example with an empty rootfs cache
//     (the python-sci image unpacked from the store) against a cached one.
//   - data: a rerun whose dataset is a 1 GiB file served on loopback by a
//     plain HTTP file server (net/http, sendfile), minus the same rerun with
//     a 4-byte dataset, against `curl -o` of the same URL (goal: curl / that
//     difference >= 0.9) and `curl -o && sha256sum` (goal: the difference
//     is below it). The analysis (python image) only stats the file and
//     reads its first MiB, so the difference is the data path.
//
// Usage (root; runc, curl, sha256sum; the images built by
// examples/images/{python-sci,python}/build.sh, see bench/packages.sh):
//
//	go run ./bench/packages -dotlab BIN -sci REF -py REF [-before BIN] [-n 5]
//
// Every row is repeated -n times, the rows of one repetition interleaved so
// that machine load hits all of them alike; the table gives medians (and
// ranges). Before each timed command the page cache's dirty data is written
// back (sync, untimed), so no row pays for the previous row's writeback.
// The program exits non-zero only when a row cannot run; a missed goal is
// printed as MISSED. See bench/README.md.
package main

import (
	"flag"
	"fmt"
	"github.com/dotlab/dotlab/imagestore"
	"os"
	"path/filepath"
	"strings"
)

// The goals.
const (
	sandboxGoal  = 1.2 // dotlab rerun / bare runc run, at most
	transferGoal = 0.9 // curl -o / (rerun 1 GiB - rerun tiny), at least
)

type config struct {
	dotlab, before string // dotlab binaries: the one measured, and optionally an older one
	sciRef, pyRef  string // NAME@sha256:DIGEST of the python-sci and python images
	varDir         string // where build.sh keeps the image store (VAR/cache)
	work           string // scratch directory (same file system as the caches)
	n, unpackN     int
	size           int64
	only           string
	keep           bool
}

func main() {
	var c config
	flag.StringVar(&c.dotlab, "dotlab", "", "the dotlab binary to measure (required)")
	flag.StringVar(&c.before, "before", "", "an older dotlab binary whose data row is measured alongside (optional)")
	flag.StringVar(&c.sciRef, "sci", "", "the python-sci image reference printed by examples/images/python-sci/build.sh")
	flag.StringVar(&c.pyRef, "py", "", "the python image reference printed by examples/images/python/build.sh")
	flag.StringVar(&c.varDir, "var", "var", "the VAR_DIR the image recipes were built into (the store is VAR/cache)")
	flag.StringVar(&c.work, "work", "", "scratch directory (default: a new one under VAR)")
	flag.IntVar(&c.n, "n", 5, "repetitions of every row")
	flag.IntVar(&c.unpackN, "unpack-n", 3, "repetitions of the first-run unpack")
	flag.Int64Var(&c.size, "size", 1<<30, "bytes of the big dataset")
	flag.StringVar(&c.only, "only", "sandbox,unpack,data", "rows to run (comma-separated)")
	flag.BoolVar(&c.keep, "keep", false, "keep the scratch directory")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/packages:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	if c.dotlab == "" || (strings.Contains(c.only, "data") && c.pyRef == "") || (!onlyData(c.only) && c.sciRef == "") {
		return fmt.Errorf("give -dotlab BIN and the image references (-sci for sandbox and unpack, -py for data); bench/packages.sh does")
	}
	var err error
	for _, p := range []*string{&c.dotlab, &c.before, &c.varDir} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				return err
			}
		}
	}
	if c.work == "" {
		if c.work, err = os.MkdirTemp(c.varDir, "bench-packages-"); err != nil {
			return err
		}
	}
	if !c.keep {
		defer imagestore.RemoveTree(c.work)
	}
	printMachine(c)
	var rows []row
	for _, part := range strings.Split(c.only, ",") {
		var r []row
		switch part {
		case "sandbox":
			r, err = sandboxRows(c)
		case "unpack":
			r, err = unpackRows(c)
		case "data":
			r, err = dataRows(c)
		default:
			err = fmt.Errorf("-only: unknown row %q (sandbox, unpack, data)", part)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", part, err)
		}
		rows = append(rows, r...)
	}
	fmt.Printf("load average after: %s\n\n", loadavg())
	printTable(rows)
	return nil
}

func onlyData(only string) bool { return strings.Trim(only, ", ") == "data" }
