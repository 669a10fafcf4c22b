package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dotlab/dotlab/internal/safefs"
	"golang.org/x/sys/unix"
)

// The bundle's mount points: the out tmpfs, and for a scratch run the
// scratch tmpfs (the overlay's upper and work directories) and the overlay.
const (
	bundleOut          = "out"
	bundleScratchLayer = "scratch-layer"
	bundleScratch      = "scratch"
)

// MaxKeepBytes bounds each file of Spec.Keep read back from the scratch copy.
const MaxKeepBytes = 16 << 20

// KeptFile is one Spec.Keep file as the run left it: its bytes, or why it
// could not be read (Problem: "was not written by the run", "was deleted
// by the run", "is a symbolic link (not followed)", "is … bytes, over the
// …-byte bound", …).
type KeptFile struct {
	Data    []byte
	Problem string
}

// mountWork mounts the out tmpfs and, for a scratch run, the scratch copy
// in the bundle; it returns the host paths to bind at /work/out and
// /work/scratch ("" without scratch). cleanupBundle undoes both.
func mountWork(bundle string, spec Spec, l Limits) (outMnt, scratchMnt string, err error) {
	outMnt = filepath.Join(bundle, bundleOut)
	if err := os.Mkdir(outMnt, 0o755); err != nil {
		return "", "", err
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755,uid=%d,gid=%d", l.OutputBytes, l.OutputFiles, UID, GID)
	if err := unix.Mount("tmpfs", outMnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return "", "", fmt.Errorf("sandbox: mount out tmpfs: %w", err)
	}
	if !spec.Scratch {
		return outMnt, "", nil
	}
	scratchMnt, err = mountScratch(bundle, spec.CodeDir, l)
	return outMnt, scratchMnt, err
}

// mountScratch makes the writable copy of the code: an overlay mounted on
// the host at bundle/scratch whose lower layer is codeDir and whose upper
// and work directories are in a tmpfs of l.ScratchBytes and l.ScratchFiles
// (nosuid, nodev). The copy is copy-on-write: codeDir itself (bound
// read-only at /work/code) never changes, and what the run writes is
// charged to the tmpfs and dropped with it. The code tree is given to the
// sandbox's uid first so that the analysis may write into its directories.
func mountScratch(bundle, codeDir string, l Limits) (string, error) {
	if strings.ContainsAny(codeDir, ",:\\") {
		return "", fmt.Errorf("sandbox: scratch: the code directory %s has a character overlayfs options cannot carry (',', ':' or '\\'): use another cache directory", codeDir)
	}
	if err := chownTree(codeDir); err != nil {
		return "", fmt.Errorf("sandbox: scratch: %w", err)
	}
	layer := filepath.Join(bundle, bundleScratchLayer)
	merged := filepath.Join(bundle, bundleScratch)
	for _, d := range []string{layer, merged} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return "", err
		}
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", l.ScratchBytes, l.ScratchFiles)
	if err := unix.Mount("tmpfs", layer, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return "", fmt.Errorf("sandbox: mount scratch tmpfs: %w", err)
	}
	upper, work := filepath.Join(layer, "upper"), filepath.Join(layer, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
	}
	if err := os.Chown(upper, UID, GID); err != nil {
		return "", err
	}
	// No redirects, index or metacopy: every file the run changes is
	// copied up whole into the tmpfs, so the upper layer alone holds what
	// the run wrote (Spec.Keep reads it from there).
	ov := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,redirect_dir=off,index=off,metacopy=off", codeDir, upper, work)
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_NOSUID|unix.MS_NODEV, ov); err != nil {
		return "", fmt.Errorf("sandbox: mount scratch overlay: %w", err)
	}
	return merged, nil
}

// chownTree gives every entry of dir (symlinks themselves, never their
// targets) to the sandbox's uid and gid.
func chownTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, UID, GID)
	})
}

// readKept reads the Spec.Keep files from the scratch copy's upper layer:
// only what the run wrote or changed is there (a file the package ships and
// the run left alone is not), read without following any symlink and at
// most MaxKeepBytes each.
func readKept(bundle string, keep []string) (map[string]KeptFile, error) {
	if len(keep) == 0 {
		return nil, nil
	}
	root, err := os.OpenRoot(filepath.Join(bundle, bundleScratchLayer, "upper"))
	if err != nil {
		return nil, fmt.Errorf("sandbox: scratch: %w", err)
	}
	defer root.Close()
	kept := map[string]KeptFile{}
	for _, name := range keep {
		if gone, ok := whiteout(root, name); ok {
			why := "was deleted by the run"
			if gone != name {
				why += " (its directory " + gone + " was removed)"
			}
			kept[name] = KeptFile{Problem: why}
			continue
		}
		data, err := safefs.ReadNoFollow(root, name, MaxKeepBytes)
		var rp *safefs.ReadProblem
		switch {
		case errors.As(err, &rp) && rp.Phrase == "does not exist":
			kept[name] = KeptFile{Problem: "was not written by the run (only files the run writes or changes in its scratch copy are read)"}
		case errors.As(err, &rp):
			kept[name] = KeptFile{Problem: rp.Phrase}
		case err != nil:
			return nil, err
		default:
			kept[name] = KeptFile{Data: data}
		}
	}
	return kept, nil
}

// whiteout reports whether name (a clean relative path) or a directory on
// its way is an overlay whiteout in the upper layer root, a character
// device 0:0: what overlayfs leaves where the run deleted a file of the
// lower layer. It returns the deleted path.
func whiteout(root *os.Root, name string) (string, bool) {
	parts := strings.Split(name, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		fi, err := root.Lstat(p)
		if err != nil {
			return "", false
		}
		if fi.Mode()&fs.ModeCharDevice != 0 {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Rdev == 0 {
				return p, true
			}
		}
		if !fi.IsDir() {
			return "", false
		}
	}
	return "", false
}

// cleanupBundle unmounts what mountWork mounted in bundle (lazily if busy),
// then removes the bundle; nothing is removed while a mount stays, so the
// removal can never reach through the overlay into the code directory.
func cleanupBundle(bundle string) error {
	for _, m := range []string{bundleScratch, bundleScratchLayer, bundleOut} {
		p := filepath.Join(bundle, m)
		if err := unix.Unmount(p, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("sandbox: unmount %s: %w", p, err)
			}
		}
	}
	return os.RemoveAll(bundle)
}
