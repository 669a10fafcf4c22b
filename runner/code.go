package runner

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strings"

	"github.com/dotlab/dotlab/internal/safefs"
	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	gitclient "github.com/go-git/go-git/v5/plumbing/transport/git"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// ErrNoCommit is returned (wrapped) when the pinned commit is not in the repository.
var ErrNoCommit = errors.New("commit not found in the repository")

// ErrNoRepository is returned (wrapped) when the repository cannot be found
// at its URL (HTTP 404, no such local path).
var ErrNoRepository = errors.New("repository not found")

// ErrUnsafeTree: the pinned commit's tree has an entry that cannot be
// checked out safely (a .git entry, a path through a symlink, an escape).
var ErrUnsafeTree = errors.New("the commit's tree cannot be checked out safely")

// checkoutCommit writes the tree of commit (40 hex, resolved as an object id,
// never as a ref name) from repository into dst (an empty directory).
//
// https/http/git repositories are fetched with go-git's upload-pack protocol
// over the policy's http client (no submodules, no hooks, no external git);
// a local path or file:// URL is opened in place with go-git. The tree is
// written by writeTree, which refuses .git entries and cannot write outside dst.
func checkoutCommit(ctx context.Context, p Policy, repository, commit, dst, scratch string, lim safefs.Limits) error {
	if !plumbing.IsHash(commit) || len(commit) != 40 {
		return fmt.Errorf("code.commit %q: want a full 40-hex commit id", commit)
	}
	h := plumbing.NewHash(commit)
	u, err := p.CheckURL("code.repository", repository)
	if err != nil {
		return err
	}
	var st storer.EncodedObjectStorer
	switch u.Scheme {
	case "file", "":
		dir, err := p.localRepo("code.repository", u)
		if err != nil {
			return err
		}
		repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: false})
		if err != nil {
			return fmt.Errorf("code.repository %s: %w: %v", repository, ErrNoRepository, err)
		}
		st = repo.Storer
	default:
		gitdir, err := os.MkdirTemp(scratch, "git-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(gitdir)
		fs := filesystem.NewStorage(osfs.New(gitdir), cache.NewObjectLRUDefault())
		if err := fetchCommit(ctx, p, repository, h, fs, lim.MaxBytes); err != nil {
			return err
		}
		st = fs
	}
	c, err := object.GetCommit(st, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return fmt.Errorf("code.commit %s: %w %s", commit, ErrNoCommit, repository)
	}
	if err != nil {
		return fmt.Errorf("code.commit %s: %w", commit, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return fmt.Errorf("code.commit %s: tree: %w", commit, err)
	}
	if err := writeGitTree(tree, dst, lim); err != nil {
		// The tree is the claim's: an entry that cannot be written safely
		// (.git, a path through a symlink, an escape) is the spec's problem.
		return fmt.Errorf("code.commit %s: %w: %v", commit, ErrUnsafeTree, err)
	}
	return nil
}

// fetchCommit runs one upload-pack exchange asking for commit h alone, at
// depth 1 (a shallow fetch of the commit by id: its tree and blobs, none of
// its history, so objects missing from older history on the server do not
// matter), storing the pack in st. A server that has no shallow support is
// asked for h with its history. Only if the server refuses an unadvertised
// object (uploadpack.allowReachableSHA1InWant and allowAnySHA1InWant unset,
// h not a branch or tag tip) is every advertised branch and tag fetched in
// full. Either way the commit is then read by its id from the objects
// received, whose ids the pack parser computed from their bytes.
func fetchCommit(ctx context.Context, p Policy, repository string, h plumbing.Hash, st *filesystem.Storage, maxPack int64) error {
	ep, err := transport.NewEndpoint(repository)
	if err != nil {
		return fmt.Errorf("code.repository %q: %w", repository, err)
	}
	tr, err := gitTransport(ctx, p, ep)
	if err != nil {
		return err
	}
	ctx, cancel := p.ctxWithTimeout(ctx)
	defer cancel()
	err = uploadPack(ctx, tr, ep, []plumbing.Hash{h}, st, maxPack, 1)
	if err == nil {
		if _, gerr := object.GetCommit(st, h); gerr == nil {
			return nil
		}
	}
	switch {
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("code.repository %s: %w", repository, ErrNoRepository)
	case errors.Is(err, safefs.ErrOverBudget):
		return fmt.Errorf("code.repository %s: %w: %v", repository, ErrUnsafeTree, err)
	case ctx.Err() != nil:
		return fmt.Errorf("code.repository %s: %w", repository, ctx.Err())
	}
	// The server refused an unadvertised object: ask for every branch and tag.
	err = uploadPack(ctx, tr, ep, nil, st, maxPack, 0)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("code.repository %s: %w", repository, ErrNoRepository)
	case errors.Is(err, ErrNoCommit):
		return fmt.Errorf("code.commit %s: %w", h, err)
	case errors.Is(err, safefs.ErrOverBudget):
		return fmt.Errorf("code.repository %s: %w: %v", repository, ErrUnsafeTree, err)
	}
	return fmt.Errorf("code.repository %s: fetch: %w", repository, err)
}

// gitTransport is go-git's client for ep under the policy: http(s) over the
// policy's client; git:// only after every resolved address passed the
// policy (go-git's git:// client dials by itself, past the policy's dialer;
// CheckURL admits git:// only with AllowPrivate).
func gitTransport(ctx context.Context, p Policy, ep *transport.Endpoint) (transport.Transport, error) {
	switch ep.Protocol {
	case "https", "http":
		return githttp.NewClient(p.Client()), nil
	case "git":
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", ep.Host)
		if err != nil {
			return nil, fmt.Errorf("code.repository: resolve %s: %w", ep.Host, err)
		}
		for _, a := range addrs {
			if err := p.CheckAddr(a); err != nil {
				return nil, fmt.Errorf("code.repository: %w", err)
			}
		}
		return gitclient.DefaultClient, nil
	}
	return nil, fmt.Errorf("code.repository: transport %q is %w", ep.Protocol, ErrRefused)
}

// uploadPack runs one upload-pack exchange asking for wants (nil: every
// advertised branch and tag) and stores the pack in st; a pack larger than
// maxPack bytes is refused (safefs.ErrOverBudget). depth > 0 asks for that
// many commits of history when the server advertises "shallow" (0: all).
func uploadPack(ctx context.Context, tr transport.Transport, ep *transport.Endpoint, wants []plumbing.Hash, st *filesystem.Storage, maxPack int64, depth int) error {
	sess, err := tr.NewUploadPackSession(ep, nil)
	if err != nil {
		return err
	}
	defer sess.Close()
	adv, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return err
	}
	if wants == nil {
		if wants, err = branchesAndTags(adv); err != nil {
			return err
		}
	}
	req := packp.NewUploadPackRequestFromCapabilities(adv.Capabilities)
	req.Wants = wants
	if depth > 0 && adv.Capabilities.Supports(capability.Shallow) {
		req.Capabilities.Set(capability.Shallow)
		req.Depth = packp.DepthCommits(depth)
	}
	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Close()
	var pack io.Reader = resp
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		pack = sideband.NewDemuxer(sideband.Sideband64k, resp)
	case req.Capabilities.Supports(capability.Sideband):
		pack = sideband.NewDemuxer(sideband.Sideband, resp)
	}
	if maxPack > 0 {
		pack = safefs.NewBudget(safefs.Limits{}).Reader("the git pack", maxPack, pack)
	}
	return packfile.UpdateObjectStorage(st, pack)
}

// branchesAndTags lists the distinct commits of every advertised branch and tag.
func branchesAndTags(adv *packp.AdvRefs) ([]plumbing.Hash, error) {
	refs, err := adv.AllReferences()
	if err != nil {
		return nil, err
	}
	var wants []plumbing.Hash
	seen := map[plumbing.Hash]bool{}
	for name, ref := range refs {
		n := name.String()
		if ref.Type() == plumbing.HashReference && (strings.HasPrefix(n, "refs/heads/") || strings.HasPrefix(n, "refs/tags/")) && !seen[ref.Hash()] {
			seen[ref.Hash()] = true
			wants = append(wants, ref.Hash())
		}
	}
	if len(wants) == 0 {
		return nil, fmt.Errorf("%w: the repository advertises no branches or tags", ErrNoCommit)
	}
	return wants, nil
}

// writeGitTree writes every file of tree under dst through an os.Root:
// regular and executable files with modes 0644/0755, symlinks as symlinks
// (never followed here), submodules skipped. A path with a ".git" component
// is refused (it would plant repository metadata or hooks).
func writeGitTree(tree *object.Tree, dst string, lim safefs.Limits) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	budget := safefs.NewBudget(lim)
	return tree.Files().ForEach(func(f *object.File) error {
		if _, err := safefs.SplitName(f.Name, false, "tree entry"); err != nil {
			return fmt.Errorf("code: %w", err)
		}
		for _, part := range strings.Split(f.Name, "/") {
			if strings.EqualFold(part, ".git") {
				return fmt.Errorf("code: tree entry %q writes into .git: refused", f.Name)
			}
		}
		if f.Mode == filemode.Submodule {
			return nil
		}
		if err := budget.Entry(f.Name); err != nil {
			return fmt.Errorf("code: %w", err)
		}
		if err := budget.File(f.Name, f.Size); err != nil {
			return fmt.Errorf("code: %w", err)
		}
		if err := root.MkdirAll(path.Dir(f.Name), 0o755); err != nil {
			return fmt.Errorf("code: %s: %w", f.Name, err)
		}
		rc, err := f.Reader()
		if err != nil {
			return fmt.Errorf("code: %s: %w", f.Name, err)
		}
		defer rc.Close()
		if err := writeEntry(root, f.Name, f.Mode == filemode.Symlink, f.Mode == filemode.Executable, budget.Reader(f.Name, f.Size, rc)); err != nil {
			return fmt.Errorf("code: %s: %w", f.Name, err)
		}
		return nil
	})
}

// writeEntry creates one file (or symlink, whose target is read from r) in
// root, refusing a path that goes through a symbolic link.
func writeEntry(root *os.Root, name string, symlink, executable bool, r io.Reader) error {
	if err := safefs.NoSymlinkParents(root, name); err != nil {
		return err
	}
	if symlink {
		target, err := io.ReadAll(io.LimitReader(r, 4096))
		if err != nil {
			return err
		}
		return root.Symlink(string(target), name)
	}
	mode := safefs.FileMode(executable)
	if _, err := safefs.CreateSparseFrom(root, name, mode, r); err != nil {
		return err
	}
	return root.Chmod(name, mode)
}

// CodeLimits are the bounds of a code checkout or archive (docs/sandbox.md "Unpacking
// untrusted trees"): sized for replication packages that carry their data
// (a few GB in tens of thousands of files), refusing tree and
// decompression bombs before they fill the runner's disk.
func CodeLimits() safefs.Limits {
	return safefs.Limits{
		MaxEntries:   500_000,
		MaxBytes:     16 << 30,
		MaxFileBytes: 8 << 30,
		MaxRatio:     100,
		RatioAfter:   64 << 20,
	}
}

// extractArchive unpacks a code archive (tar, tar.gz or zip, detected by
// content) into dst through an os.Root. Directories, regular files and
// symlinks are kept (file modes reduced to 0644/0755); other entry types are
// skipped; nothing can land outside dst. Names with `..`, empty components
// or NUL bytes are refused (not cleaned), and the tree is held to
// CodeLimits.
func extractArchive(archive, dst string, lim safefs.Limits) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte("PK\x03\x04")):
		return extractZip(root, f, lim)
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		counted := &safefs.CountingReader{R: br}
		zr, err := gzip.NewReader(counted)
		if err != nil {
			return fmt.Errorf("code.archive: %w", err)
		}
		budget := safefs.NewBudget(lim)
		budget.Compressed = func() int64 { return counted.N }
		return codeTar(root, zr, budget)
	default:
		return codeTar(root, br, safefs.NewBudget(lim))
	}
}

// extractZip unpacks a zip archive into root under the same rules as a tar
// (safefs.StrictName names, lim held on declared and actual sizes, the
// ratio against the archive's size).
func extractZip(root *os.Root, f *os.File, lim safefs.Limits) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(f, fi.Size())
	if err != nil {
		return fmt.Errorf("code.archive: %w", err)
	}
	budget := safefs.NewBudget(lim)
	compressed := fi.Size()
	budget.Compressed = func() int64 { return compressed }
	for _, zf := range zr.File {
		name, err := safefs.StrictName(zf.Name, zf.FileInfo().IsDir())
		if err != nil {
			return fmt.Errorf("code.archive: %w", err)
		}
		if name == "" {
			if !zf.FileInfo().IsDir() {
				return fmt.Errorf("code.archive: %w: a file entry names the root directory itself", safefs.ErrUnsafeName)
			}
			continue
		}
		if err := budget.Entry(name); err != nil {
			return fmt.Errorf("code.archive: %w", err)
		}
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
			return err
		}
		if zf.FileInfo().IsDir() {
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
			continue
		}
		mode := zf.Mode()
		if !mode.IsRegular() && mode&os.ModeSymlink == 0 {
			continue
		}
		size := int64(zf.UncompressedSize64)
		if zf.UncompressedSize64 > 1<<62 {
			size = -1
		}
		if err := budget.File(name, size); err != nil {
			return fmt.Errorf("code.archive: %w", err)
		}
		rc, err := zf.Open()
		if err != nil {
			return err
		}
		err = writeEntry(root, name, mode&os.ModeSymlink != 0, mode&0o111 != 0, budget.Reader(name, size, rc))
		rc.Close()
		if err != nil {
			return fmt.Errorf("code.archive: %s: %w", name, err)
		}
	}
	return nil
}

func codeTar(root *os.Root, r io.Reader, budget *safefs.Budget) error {
	err := safefs.ExtractTar(root, r, safefs.TarOptions{Symlinks: true, NoThroughLinks: true, Budget: budget})
	switch {
	case errors.Is(err, safefs.ErrUnsafeName), errors.Is(err, safefs.ErrOverBudget):
		return fmt.Errorf("code.archive: %w", err)
	case err != nil:
		return fmt.Errorf("code.archive: not a valid tar, tar.gz or zip: %w", err)
	}
	return nil
}
