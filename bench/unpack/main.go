// Command unpack times the first unpack of one image (Store.Rootfs) from a
// copy of an image store, optionally under a CPU profile, and, as the
// yardstick, `tar -xzf` of the same layer blobs (GNU tar with gzip) into an
// empty directory. bench/unpack.sh runs it built from two trees (before and
// after) alternately, so that machine load hits them alike.
//
// Usage: go run ./bench/unpack -store /work/imgvar/cache/images -ref dotlab.example/python-sci [-n 3] [-tar] [-profile cpu.pprof]
//
// The store is never written: its oci/ tree is hard-linked into a temporary
// store (blobs are read-only files) under -work, which is removed after.
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/dotlab/dotlab/imagestore"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	store := flag.String("store", "/work/imgvar/cache/images", "image store to copy (read only)")
	ref := flag.String("ref", "dotlab.example/python-sci", "image name in the store's index")
	n := flag.Int("n", 1, "repetitions")
	withTar := flag.Bool("tar", false, "also time tar -xzf of the layer blobs (the yardstick)")
	profile := flag.String("profile", "", "write a CPU profile of the first repetition's unpack here")
	work := flag.String("work", os.TempDir(), "where the temporary store is made")
	label := flag.String("label", "dotlab", "name printed on each line")
	floor := flag.String("floor", "", "an unpacked rootfs whose directories, files (empty) and links are recreated, timed: what creating the inodes alone costs on this file system")
	flag.Parse()
	if *floor != "" {
		if err := floorRow(*floor, *work); err != nil {
			fmt.Fprintln(os.Stderr, "unpack:", err)
			os.Exit(1)
		}
	}
	if err := run(*store, *ref, *n, *withTar, *profile, *work, *label); err != nil {
		fmt.Fprintln(os.Stderr, "unpack:", err)
		os.Exit(1)
	}
}

func run(storeDir, ref string, n int, withTar bool, profile, work, label string) error {
	tmp, err := os.MkdirTemp(work, "unpackbench-")
	if err != nil {
		return err
	}
	defer imagestore.RemoveTree(tmp)
	if err := linkTree(filepath.Join(storeDir, "oci"), filepath.Join(tmp, "oci")); err != nil {
		return err
	}
	st, err := imagestore.Open(tmp)
	if err != nil {
		return err
	}
	d, err := lookup(st, ref)
	if err != nil {
		return err
	}
	img, err := st.Image(d)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		exec.Command("sync").Run()
		if i == 0 && profile != "" {
			f, err := os.Create(profile)
			if err != nil {
				return err
			}
			pprof.StartCPUProfile(f)
		}
		start := time.Now()
		dir, err := st.Rootfs(img, nil)
		el := time.Since(start)
		if i == 0 && profile != "" {
			pprof.StopCPUProfile()
		}
		if err != nil {
			return err
		}
		fmt.Printf("%s unpack %s: %.2f s\n", label, ref, el.Seconds())
		imagestore.RemoveTree(dir)
		if withTar {
			if err := tarRow(tmp, img); err != nil {
				return err
			}
		}
	}
	return nil
}

// tarRow times `tar -xzf` (GNU tar, gzip) of every layer blob into one empty directory.
func tarRow(tmp string, img *imagestore.Image) error {
	out := filepath.Join(tmp, "tar-out")
	defer imagestore.RemoveTree(out)
	if err := os.Mkdir(out, 0o755); err != nil {
		return err
	}
	exec.Command("sync").Run()
	start := time.Now()
	for _, l := range img.Manifest.Layers {
		blob := filepath.Join(tmp, "oci", "blobs", l.Digest.Algorithm, l.Digest.Hex)
		if b, err := exec.Command("tar", "-xzf", blob, "-C", out).CombinedOutput(); err != nil {
			return fmt.Errorf("tar: %v: %s", err, b)
		}
	}
	fmt.Printf("tar -xzf (yardstick): %.2f s\n", time.Since(start).Seconds())
	return nil
}

// floorRow recreates the tree of src (directories, empty regular files,
// symbolic links) under a new directory of work with plain system calls,
// timed: the inode creations an unpack of src cannot avoid.
func floorRow(src, work string) error {
	dst, err := os.MkdirTemp(work, "floor-")
	if err != nil {
		return err
	}
	defer imagestore.RemoveTree(dst)
	exec.Command("sync").Run()
	start := time.Now()
	var files, dirs, links int
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			dirs++
			return os.Mkdir(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			links++
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		case d.Type().IsRegular():
			files++
			f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			return f.Close()
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("floor: %d directories, %d empty files, %d links created in %.2f s (the tree walked from the page cache)\n", dirs, files, links, time.Since(start).Seconds())
	return nil
}

func lookup(st *imagestore.Store, ref string) (v1.Hash, error) {
	entries, err := st.List()
	if err != nil {
		return v1.Hash{}, err
	}
	for _, e := range entries {
		if e.Ref == ref || strings.HasPrefix(e.Ref, ref+"@") {
			return imagestore.ParseDigest(e.Digest)
		}
	}
	return v1.Hash{}, fmt.Errorf("no image %q in the store", ref)
}

// linkTree hard-links every file of src into a new tree at dst.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if strings.HasSuffix(p, ".lock") {
			return nil
		}
		return os.Link(p, target)
	})
}
