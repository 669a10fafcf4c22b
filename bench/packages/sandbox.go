package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/dotlab/dotlab/demo"
	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/sandbox"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// exampleDir is the Python package example, relative to the repository root.
const exampleDir = "examples/claims/longley-1967"

// longley writes the example's manifest into dir, re-pointed at a local
// repository made from its code/ (the pinned commit) and at sciRef, and
// returns the manifest's path and the repository.
func longley(c config, dir string) (manifestPath, repo string, err error) {
	raw, err := os.ReadFile(filepath.Join(exampleDir, "manifest.json"))
	if err != nil {
		return "", "", fmt.Errorf("%w (run from the repository root)", err)
	}
	m, err := manifest.Parse(raw)
	if err != nil {
		return "", "", err
	}
	repo = filepath.Join(dir, "repo")
	commit, err := demo.CommitExample(filepath.Join(exampleDir, "code"), repo)
	if err != nil {
		return "", "", err
	}
	if commit != m.Code.Commit {
		fmt.Printf("note: code/ commits as %s, manifest.json pins %s\n", commit, m.Code.Commit)
	}
	m.Code.Repository, m.Code.Commit, m.Environment.Image = repo, commit, c.sciRef
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", "", err
	}
	manifestPath = filepath.Join(dir, "manifest.json")
	return manifestPath, repo, os.WriteFile(manifestPath, b, 0o644)
}

// sharedCache is the cache the sandbox and data rows rerun with: the image
// store of VAR/cache, hard-linked (made once).
func sharedCache(c config) (string, error) {
	cache := filepath.Join(c.work, "cache")
	if _, err := os.Stat(cache); err == nil {
		return cache, nil
	}
	return cache, linkTree(filepath.Join(c.varDir, "cache", "images", "oci"), filepath.Join(cache, "images", "oci"))
}

// sandboxRows: `dotlab rerun` of the example (image unpacked and cached)
// against a bare `runc run` of python3 analysis.py on the same rootfs.
func sandboxRows(c config) ([]row, error) {
	dir := filepath.Join(c.work, "sandbox")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	mpath, repo, err := longley(c, dir)
	if err != nil {
		return nil, err
	}
	cache, err := sharedCache(c)
	if err != nil {
		return nil, err
	}
	fmt.Println("sandbox: warm-up rerun (unpacks the python-sci rootfs once)…")
	_, warm, err := rerun(c.dotlab, mpath, c.work, cache, filepath.Join(dir, "warm"))
	if err != nil {
		return nil, err
	}
	var tRerun, tExec, tBare []time.Duration
	for i := 0; i < c.n; i++ {
		d, l, err := rerun(c.dotlab, mpath, c.work, cache, filepath.Join(dir, fmt.Sprintf("out-%d", i)))
		if err != nil {
			return nil, err
		}
		tRerun, tExec = append(tRerun, d), append(tExec, l.execute)
		b, err := bareRun(dir, repo, warm.rootfs, i)
		if err != nil {
			return nil, err
		}
		tBare = append(tBare, b)
		fmt.Printf("  %d: dotlab rerun %s (runc run inside: %s), bare runc run %s\n", i+1, secs(d), secs(l.execute), secs(b))
	}
	ratio := median(tRerun).Seconds() / median(tBare).Seconds()
	return []row{
		series("(a) `dotlab rerun` longley-1967, python-sci cached", tRerun, "whole CLI: manifest, git checkout, scratch overlay, runc, target sources"),
		series("(a) … of which its `runc run` (execute step)", tExec, "from logs.jsonl"),
		series("(a) bare `runc run` python3 analysis.py, same rootfs", tBare, "hand-written bundle, writable code copy at /work/code, no seccomp or limits"),
		ratioRow("(a) sandbox cost: rerun / bare runc", ratio, fmt.Sprintf("<= %.1fx", sandboxGoal), ratio <= sandboxGoal, ""),
	}, nil
}

// bareRun copies the code (untimed) and times `runc run` of python3
// analysis.py in it, on rootfs, with a minimal hand-written bundle.
func bareRun(dir, repo, rootfs string, i int) (time.Duration, error) {
	run := filepath.Join(dir, fmt.Sprintf("bare-%d", i))
	code := filepath.Join(run, "code")
	if err := os.MkdirAll(code, 0o755); err != nil {
		return 0, err
	}
	for _, f := range []string{"analysis.py"} {
		b, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(code, f), b, 0o644); err != nil {
			return 0, err
		}
	}
	if err := os.Chown(code, sandbox.UID, sandbox.GID); err != nil {
		return 0, err
	}
	if err := writeBareConfig(run, rootfs, code, i); err != nil {
		return 0, err
	}
	d, err := timed("runc", "--root", filepath.Join(dir, "runc-state"), "run", "--bundle", run, fmt.Sprintf("bench-bare-%d", i))
	if err != nil {
		return d, err
	}
	if _, err := os.Stat(filepath.Join(code, "output", "coefficients.csv")); err != nil {
		return d, fmt.Errorf("bare run wrote no output/coefficients.csv: %w", err)
	}
	return d, nil
}

// writeBareConfig writes a runc-spec style config: the sandbox's uid, the
// image's environment as the sandbox sets it (LANG, HOME, MPLBACKEND), a
// read-only root, /proc, /dev and /tmp, the code copy bound read-write.
func writeBareConfig(bundle, rootfs, code string, i int) error {
	cfg := specs.Spec{
		Version: "1.0.2",
		Process: &specs.Process{
			User: specs.User{UID: sandbox.UID, GID: sandbox.GID}, Args: []string{"python3", "analysis.py"}, Cwd: "/work/code",
			Env:             []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MPLBACKEND=Agg", "LANG=C.UTF-8", "HOME=/tmp", "TMPDIR=/tmp"},
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: rootfs, Readonly: true},
		Hostname: "bare",
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777"}},
			{Destination: "/work/code", Type: "bind", Source: code, Options: []string{"rbind", "rw"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: fmt.Sprintf("/dotlab-bench/bare-%d", i),
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace},
				{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace}},
		},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644)
}

// unpackRows: the example's first rerun with an empty rootfs cache (the
// python-sci image unpacked from the store) against the next, cached one.
func unpackRows(c config) ([]row, error) {
	dir := filepath.Join(c.work, "unpack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	mpath, _, err := longley(c, dir)
	if err != nil {
		return nil, err
	}
	var tUnpack, tFirst, tCached []time.Duration
	var size int64
	for i := 0; i < c.unpackN; i++ {
		cache := filepath.Join(dir, fmt.Sprintf("cache-%d", i))
		if err := linkTree(filepath.Join(c.varDir, "cache", "images", "oci"), filepath.Join(cache, "images", "oci")); err != nil {
			return nil, err
		}
		first, l, err := rerun(c.dotlab, mpath, c.work, cache, filepath.Join(dir, fmt.Sprintf("first-%d", i)))
		if err != nil {
			return nil, err
		}
		cached, _, err := rerun(c.dotlab, mpath, c.work, cache, filepath.Join(dir, fmt.Sprintf("cached-%d", i)))
		if err != nil {
			return nil, err
		}
		size = treeBytes(l.rootfs)
		tUnpack, tFirst, tCached = append(tUnpack, l.unpack), append(tFirst, first), append(tCached, cached)
		fmt.Printf("  %d: unpack %s; first rerun %s, cached rerun %s\n", i+1, secs(l.unpack), secs(first), secs(cached))
		imagestore.RemoveTree(cache)
	}
	ratio := median(tFirst).Seconds() / median(tCached).Seconds()
	return []row{
		series("(b) unpack python-sci from the store (rootfs step of the first rerun)", tUnpack, fmt.Sprintf("%d MB unpacked; layer blob in the page cache", size/1e6)),
		series("(b) first rerun, empty rootfs cache", tFirst, ""),
		series("(b) next rerun, rootfs cached", tCached, ""),
		ratioRow("(b) first / cached rerun", ratio, "", false, fmt.Sprintf("%d repetitions", c.unpackN)),
	}, nil
}

// treeBytes is the apparent size of the regular files under dir.
func treeBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
