package runner

import (
	"context"
	"fmt"
	"os"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// CheckoutRemote writes the tree of repository (an https URL; http and
// git:// with AllowPrivate) at commit into dst, an empty directory, under
// the policy and CodeLimits, exactly as a rerun checks code out (go-git, no
// submodules, no hooks, no .git entries). An empty commit means the commit
// of the remote's default branch (its advertised HEAD). It returns the
// full 40-hex commit written. `dotlab manifest init` uses it to pin a
// package given by URL.
func CheckoutRemote(ctx context.Context, p Policy, repository, commit, dst string) (string, error) {
	u, err := p.CheckURL("code.repository", repository)
	if err != nil {
		return "", err
	}
	if u.Scheme == "file" || u.Scheme == "" {
		return "", fmt.Errorf("code.repository %q: a local repository is opened in place, not fetched", repository)
	}
	if commit == "" {
		if commit, err = remoteHead(ctx, p, repository); err != nil {
			return "", err
		}
	}
	scratch, err := os.MkdirTemp("", "dotlab-init-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	if err := checkoutCommit(ctx, p, repository, commit, dst, scratch, CodeLimits()); err != nil {
		return "", err
	}
	return commit, nil
}

// remoteHead asks the remote for its references (one upload-pack
// advertisement, no objects) and returns the commit its HEAD points at.
func remoteHead(ctx context.Context, p Policy, repository string) (string, error) {
	ep, err := transport.NewEndpoint(repository)
	if err != nil {
		return "", fmt.Errorf("code.repository %q: %w", repository, err)
	}
	tr, err := gitTransport(ctx, p, ep)
	if err != nil {
		return "", err
	}
	ctx, cancel := p.ctxWithTimeout(ctx)
	defer cancel()
	sess, err := tr.NewUploadPackSession(ep, nil)
	if err != nil {
		return "", fmt.Errorf("code.repository %s: %w", repository, err)
	}
	defer sess.Close()
	adv, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return "", fmt.Errorf("code.repository %s: %w: %v", repository, ErrNoRepository, err)
	}
	if adv.Head != nil && !adv.Head.IsZero() {
		return adv.Head.String(), nil
	}
	refs, err := adv.AllReferences()
	if err == nil {
		for _, b := range []string{"main", "master"} {
			if r, ok := refs[plumbing.NewBranchReferenceName(b)]; ok && r.Type() == plumbing.HashReference {
				return r.Hash().String(), nil
			}
		}
	}
	return "", fmt.Errorf("code.repository %s: the remote advertises no HEAD (nor main or master): give --commit", repository)
}
