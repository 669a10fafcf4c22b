package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dotlab/dotlab/internal/testfix"
)

// brokenHistory makes, under root, bare repositories NAME.git holding three
// commits: the first adds history.txt, the second (the one a manifest
// pins) removes it and changes run.sh, the third changes run.sh again.
// With broken set, history.txt's blob is then deleted from the bare
// repository's object store, as on a mirror that lost old objects: the
// pinned commit's tree is complete, its history is not. allowAny sets
// uploadpack.allowAnySHA1InWant, so the server hands out commits by id.
// It returns the pinned and tip commits.
func brokenHistory(t *testing.T, root, name string, broken, allowAny bool) (pinned, tip string) {
	t.Helper()
	src := filepath.Join(root, name+"-src")
	os.MkdirAll(src, 0o755)
	testfix.Git(t, src, "init", "-q", "-b", "main")
	write := func(file, body string) {
		if err := os.WriteFile(filepath.Join(src, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("history.txt", "an old data file, later removed\n")
	write("run.sh", "echo v1\n")
	testfix.Git(t, src, "add", ".")
	testfix.Git(t, src, "commit", "-q", "-m", "first")
	lost := testfix.Git(t, src, "rev-parse", "HEAD:history.txt")
	testfix.Git(t, src, "rm", "-q", "history.txt")
	write("run.sh", "echo v2\n")
	testfix.Git(t, src, "commit", "-q", "-am", "pinned")
	pinned = testfix.Git(t, src, "rev-parse", "HEAD")
	write("run.sh", "echo v3\n")
	testfix.Git(t, src, "commit", "-q", "-am", "tip")
	tip = testfix.Git(t, src, "rev-parse", "HEAD")

	bare := filepath.Join(root, name+".git")
	testfix.Git(t, root, "init", "-q", "--bare", bare)
	// Few objects: receive-pack stores them loose (receive.unpackLimit), one file each.
	testfix.Git(t, src, "push", "-q", bare, "main")
	if allowAny {
		testfix.Git(t, bare, "config", "uploadpack.allowAnySHA1InWant", "true")
	}
	if broken {
		if err := os.Remove(testfix.LooseObject(bare, lost)); err != nil {
			t.Fatalf("deleting the old blob: %v", err)
		}
		// The repository is really broken: git itself cannot clone it.
		if out, err := exec.Command("git", "clone", "-q", "--no-local", bare, filepath.Join(root, name+"-clone")).CombinedOutput(); err == nil {
			t.Fatalf("a full clone of the broken repository succeeded:\n%s", out)
		}
	}
	return pinned, tip
}

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
	pinned, tip := brokenHistory(t, root, "any", true, true)
	if got, err := fetch("any.git", pinned); err != nil || got != "echo v2\n" {
		t.Fatalf("pinned commit of a repository with a missing old blob: %q, %v", got, err)
	}
	// Missing history, no allow*SHA1InWant: a tip is advertised, so it is
	// still fetched shallow.
	_, tip = brokenHistory(t, root, "tips", true, false)
	if got, err := fetch("tips.git", tip); err != nil || got != "echo v3\n" {
		t.Fatalf("tip of a repository with a missing old blob: %q, %v", got, err)
	}
	// A complete repository whose server refuses unadvertised commits: the
	// fallback fetches every branch in full and finds the pinned commit.
	pinned, _ = brokenHistory(t, root, "strict", false, false)
	if got, err := fetch("strict.git", pinned); err != nil || got != "echo v2\n" {
		t.Fatalf("non-tip commit where the server refuses wants by id: %q, %v", got, err)
	}
	// Both at once (history broken, the commit not handed out by id): the
	// full fetch is all there is, and the server cannot send it.
	pinned, _ = brokenHistory(t, root, "stuck", true, false)
	if _, err := fetch("stuck.git", pinned); err == nil {
		t.Fatal("the full fetch of a broken repository succeeded")
	}
}
