package runner

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/testfix"
)

func TestShallowFetchOfThePinnedCommit(t *testing.T) {
	root := t.TempDir()
	base := testfix.GitDaemon(t, root)
	p := LocalPolicy("/")
	fetch := func(repo, commit string) (string, error) {
		dst := t.TempDir()
		err := checkoutCommit(context.Background(), p, base+"/"+repo, commit, dst, t.TempDir(), CodeLimits())
		got, _ := os.ReadFile(filepath.Join(dst, "run.sh"))
		return string(got), err
	}

	// Missing history, the server hands out commits by id: the pinned
	// (not a tip) commit is fetched shallow, and its tree is complete.
	pinned, tip := testfix.BrokenHistory(t, root, "any", "echo v2\n", true, true)
	if got, err := fetch("any.git", pinned); err != nil || got != "echo v2\n" {
		t.Fatalf("pinned commit of a repository with a missing old blob: %q, %v", got, err)
	}
	// Missing history, no allow*SHA1InWant: a tip is advertised, so it is
	// still fetched shallow.
	_, tip = testfix.BrokenHistory(t, root, "tips", "echo v2\n", true, false)
	if got, err := fetch("tips.git", tip); err != nil || got != "echo v3\n" {
		t.Fatalf("tip of a repository with a missing old blob: %q, %v", got, err)
	}
	// A complete repository whose server refuses unadvertised commits: the
	// fallback fetches every branch in full and finds the pinned commit.
	pinned, _ = testfix.BrokenHistory(t, root, "strict", "echo v2\n", false, false)
	if got, err := fetch("strict.git", pinned); err != nil || got != "echo v2\n" {
		t.Fatalf("non-tip commit where the server refuses wants by id: %q, %v", got, err)
	}
	// Both at once (history broken, the commit not handed out by id): the
	// full fetch is all there is, and the server cannot send it.
	pinned, _ = testfix.BrokenHistory(t, root, "stuck", "echo v2\n", true, false)
	if _, err := fetch("stuck.git", pinned); err == nil {
		t.Fatal("the full fetch of a broken repository succeeded")
	}
}
