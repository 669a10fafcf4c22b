package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// localRel maps a file:// URL or a local path onto a path relative to the
// policy's LocalRoot: an absolute path must lie under the root (lexically,
// after cleaning), a relative one is taken relative to the root. `..` that
// would climb out of the root is refused here; symlinks that lead out are
// refused by os.Root when the path is opened.
func (p Policy) localRel(what string, u *url.URL) (string, error) {
	if p.LocalRoot == "" {
		return "", fmt.Errorf("%s: local files are %w: pass --allow-local DIR to read files under DIR (your own manifest only)", what, ErrRefused)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("%s: file://%s names another host: %w", what, u.Host, ErrRefused)
	}
	root, err := filepath.Abs(p.LocalRoot)
	if err != nil {
		return "", err
	}
	name := u.Path
	if u.Scheme == "" && u.Opaque != "" {
		name = u.Opaque
	}
	if name == "" {
		return "", fmt.Errorf("%s: empty local path", what)
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(root, name)
	}
	name = filepath.Clean(name)
	rel, err := filepath.Rel(root, name)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s: %s is outside --allow-local %s and is %w", what, name, root, ErrRefused)
	}
	return rel, nil
}

// openLocal opens a local dataset or archive through an os.Root on
// LocalRoot, so neither `..` nor a symlink can lead out of it.
func (p Policy) openLocal(what string, u *url.URL) (*os.File, error) {
	rel, err := p.localRel(what, u)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(p.LocalRoot)
	if err != nil {
		return nil, fmt.Errorf("%s: --allow-local %s: %w", what, p.LocalRoot, err)
	}
	defer root.Close()
	// O_NONBLOCK: opening a FIFO (or a device) must not block the runner
	// waiting for a writer; anything but a regular file is refused below.
	// Symlinks are followed only while they stay inside the root (os.Root).
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		// os.Root's refusals (a symlink or `..` leading out of the root)
		// have no exported sentinel: every other failure is a refusal.
		return nil, fmt.Errorf("%s: %s cannot be opened inside --allow-local %s (%v) and is %w", what, rel, p.LocalRoot, err, ErrRefused)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %s is not a regular file and is %w", what, rel, ErrRefused)
	}
	return f, nil
}

// localRepo resolves a local repository path inside LocalRoot, symlinks
// included (go-git opens the directory by path, so the real path is checked
// once here; the repository is the user's own, read in place).
func (p Policy) localRepo(what string, u *url.URL) (string, error) {
	rel, err := p.localRel(what, u)
	if err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(p.LocalRoot)
	if err != nil {
		return "", fmt.Errorf("%s: --allow-local %s: %w", what, p.LocalRoot, err)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, rel))
	if err != nil {
		return "", fmt.Errorf("%s: %w: %v", what, ErrNoRepository, err)
	}
	if !inside(root, real) {
		return "", fmt.Errorf("%s: %s leads outside --allow-local %s and is %w", what, rel, p.LocalRoot, ErrRefused)
	}
	// go-git follows a gitfile (".git" holding "gitdir: PATH", as worktrees
	// and submodules write) and a worktree's "commondir": both must stay
	// inside the root too, or a repository inside DIR could read any
	// repository on the host.
	gitdirs := []string{real, filepath.Join(real, ".git")}
	target, err := gitPointer(filepath.Join(real, ".git"), "gitdir:")
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if target != "" {
		gitdir, err := resolveInside(root, real, target)
		if err != nil {
			return "", fmt.Errorf("%s: %s/.git points to %s, which %v and is %w", what, rel, target, err, ErrRefused)
		}
		gitdirs = append(gitdirs, gitdir)
	}
	for _, gitdir := range gitdirs {
		common, err := gitPointer(filepath.Join(gitdir, "commondir"), "")
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		if common == "" {
			continue
		}
		if _, err := resolveInside(root, gitdir, common); err != nil {
			return "", fmt.Errorf("%s: %s/commondir points to %s, which %v and is %w", what, gitdir, common, err, ErrRefused)
		}
	}
	return real, nil
}

// inside reports whether path (real, cleaned) lies in root.
func inside(root, path string) bool {
	r, err := filepath.Rel(root, path)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
}

// gitPointer reads a small git pointer file (".git" as a gitfile, a
// worktree's "commondir") and returns the path it names after prefix, or ""
// when the file does not exist or is a directory.
func gitPointer(file, prefix string) (string, error) {
	fi, err := os.Lstat(file)
	if err != nil || fi.IsDir() {
		return "", nil
	}
	if !fi.Mode().IsRegular() || fi.Size() > 4096 {
		return "", fmt.Errorf("%s is not a small regular file and is %w", file, ErrRefused)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	line := strings.TrimSpace(string(data))
	if prefix != "" {
		if !strings.HasPrefix(line, prefix) {
			return "", fmt.Errorf("%s is not a gitfile (%q expected) and is %w", file, prefix, ErrRefused)
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, prefix))
	}
	return line, nil
}

// resolveInside resolves target (absolute, or relative to base) with its
// symlinks and checks that it lies inside root.
func resolveInside(root, base, target string) (string, error) {
	if !filepath.IsAbs(target) {
		target = filepath.Join(base, target)
	}
	real, err := filepath.EvalSymlinks(target)
	if err != nil {
		return "", fmt.Errorf("cannot be resolved (%v)", err)
	}
	if !inside(root, real) {
		return "", fmt.Errorf("leads outside --allow-local %s", root)
	}
	return real, nil
}
