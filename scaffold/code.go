package scaffold

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dotlab/dotlab/internal/lazyre"
	"github.com/dotlab/dotlab/runner"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// localGit pins the HEAD commit of the repository at dir and proposes its
// origin remote as code.repository when the fetch policy accepts it (an
// https URL to a public host, without credentials). It returns the files
// tracked at that commit, and a reader of their contents there.
func (b *builder) localGit(dir string) (map[string]bool, codeReader, error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: false})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	head, err := repo.Head()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: no commit to pin (HEAD: %v): commit the package first", dir, err)
	}
	h := head.Hash()
	if b.opts.Commit != "" {
		if h, err = resolveCommit(repo, b.opts.Commit); err != nil {
			return nil, nil, err
		}
		if len(b.opts.Commit) < 40 {
			b.check("$.code.commit", "--commit %s resolved to %s", b.opts.Commit, h)
		}
	}
	b.m.Code.Commit = h.String()
	c, err := repo.CommitObject(h)
	if err != nil {
		return nil, nil, fmt.Errorf("--commit %s: %w", h, err)
	}
	tracked, err := treeFiles(c)
	if err != nil {
		return nil, nil, err
	}
	b.origin(repo)
	if wt, err := repo.Worktree(); err == nil {
		if st, err := wt.Status(); err == nil && b.opts.Commit == "" && hasChanges(st) {
			b.check("$.code.commit", "the worktree has uncommitted changes to tracked files: the pinned commit %s does not hold them; commit, push and run init again", b.m.Code.Commit)
		}
	}
	return tracked, commitReader(c), nil
}

// commitReader reads files as the commit c holds them.
func commitReader(c *object.Commit) codeReader {
	return func(name string, limit int64) ([]byte, error) {
		f, err := c.File(name)
		if err != nil {
			return nil, err
		}
		if f.Size > limit {
			return nil, fmt.Errorf("%d bytes, over %d MiB", f.Size, limit>>20)
		}
		r, err := f.Reader()
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return readBounded(r, limit)
	}
}

// resolveCommit resolves --commit, a full commit id or an unambiguous
// prefix of at least 7 hex digits (as git abbreviates), among the
// repository's commits.
func resolveCommit(repo *git.Repository, id string) (plumbing.Hash, error) {
	id = strings.ToLower(id)
	if len(id) < 7 || len(id) > 40 || strings.Trim(id, "0123456789abcdef") != "" {
		return plumbing.ZeroHash, fmt.Errorf("--commit %q: want a commit id (7 to 40 hex digits)", id)
	}
	if len(id) == 40 {
		return plumbing.NewHash(id), nil
	}
	iter, err := repo.CommitObjects()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	var found []plumbing.Hash
	err = iter.ForEach(func(c *object.Commit) error {
		if strings.HasPrefix(c.Hash.String(), id) {
			found = append(found, c.Hash)
		}
		return nil
	})
	switch {
	case err != nil:
		return plumbing.ZeroHash, err
	case len(found) == 0:
		return plumbing.ZeroHash, fmt.Errorf("--commit %s: no commit of the repository starts with it", id)
	case len(found) > 1:
		return plumbing.ZeroHash, fmt.Errorf("--commit %s: ambiguous (%s, %s…): give more digits", id, found[0], found[1])
	}
	return found[0], nil
}

// hasChanges: a tracked file was modified, added or deleted (untracked
// files, such as unpublished data, do not count).
func hasChanges(st git.Status) bool {
	for _, s := range st {
		if s.Worktree != git.Untracked && (s.Worktree != git.Unmodified || s.Staging != git.Unmodified) {
			return true
		}
	}
	return false
}

var scpLike = lazyre.New(`^[A-Za-z0-9_.-]+@([A-Za-z0-9.-]+):(.+)$`)

// origin proposes the origin remote's URL, or a placeholder saying why not.
func (b *builder) origin(repo *git.Repository) {
	b.m.Code.Repository = "REPLACE-with-the-https-URL-of-the-repository"
	const standIn = "https://standin.invalid/repo.git"
	rem, err := repo.Remote("origin")
	if err != nil || len(rem.Config().URLs) == 0 {
		b.placeholder("$.code.repository", standIn, "the repository has no origin remote: push it to a public forge and give its https URL; commit %s must be there", b.m.Code.Commit)
		return
	}
	u := rem.Config().URLs[0]
	if _, err := b.opts.Policy.CheckURL("code.repository", u); err != nil {
		hint := ""
		if m := scpLike().FindStringSubmatch(u); m != nil {
			hint = fmt.Sprintf(" (for an ssh remote usually https://%s/%s)", m[1], m[2])
		}
		// The URL is not copied: it may carry credentials.
		b.placeholder("$.code.repository", standIn, "the origin remote is not a URL a runner fetches (%v): give its public https URL%s", err, hint)
		return
	}
	b.m.Code.Repository = u
	b.check("$.code.repository", "the origin remote: commit %s must be pushed there", b.m.Code.Commit)
}

// treeFiles lists the files of a commit's tree.
func treeFiles(c *object.Commit) (map[string]bool, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	files := map[string]bool{}
	err = tree.Files().ForEach(func(f *object.File) error {
		if len(files) >= MaxTreeEntries {
			return fmt.Errorf("more than %d files at the commit", MaxTreeEntries)
		}
		files[f.Name] = true
		return nil
	})
	return files, err
}

// remoteCode checks out a git URL at --commit or its default branch's
// commit, under the fetch policy, and lists its files. A data directory is
// hashed only with --data: the checkout's own data/ is pinned by the commit.
func (b *builder) remoteCode(ctx context.Context) ([]string, error) {
	if c := b.opts.Commit; c != "" && len(c) != 40 {
		return nil, fmt.Errorf("--commit %q: with a git URL give the full 40-hex id (a short id is resolved in a local clone: dotlab manifest init DIR --commit %s)", c, c)
	}
	tmp, err := os.MkdirTemp("", "dotlab-init-code-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	commit, err := runner.CheckoutRemote(ctx, b.opts.Policy, b.opts.Source, b.opts.Commit, tmp)
	if err != nil {
		return nil, err
	}
	b.m.Code.Repository, b.m.Code.Commit = b.opts.Source, commit
	if b.opts.Commit == "" {
		b.check("$.code.commit", "the commit of the default branch now: pin the commit the paper's results were produced with (--commit)")
	}
	files, err := walkNames(tmp)
	if err != nil {
		return nil, err
	}
	if err := b.readCode(ctx, files, dirReader(tmp)); err != nil {
		return nil, err
	}
	inCode := map[string]bool{}
	for _, f := range files {
		inCode[f] = true
	}
	return files, b.data(filepath.Join(tmp, "data"), func(p string) bool { return inCode[p] })
}

// walkNames lists the regular files under dir (slash-separated, relative),
// skipping .git and not following symbolic links, at most MaxTreeEntries.
func walkNames(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		if len(files) > MaxTreeEntries {
			return fmt.Errorf("%s: more than %d files", dir, MaxTreeEntries)
		}
		return nil
	})
	return files, err
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
