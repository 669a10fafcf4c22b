package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/safefs"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage"
)

// storeObject encodes o into the repository's object store.
func storeObject(t *testing.T, st storage.Storer, o interface {
	Encode(plumbing.EncodedObject) error
}, typ plumbing.ObjectType) plumbing.Hash {
	t.Helper()
	eo := st.NewEncodedObject()
	eo.SetType(typ)
	if err := o.Encode(eo); err != nil {
		t.Fatal(err)
	}
	h, err := st.SetEncodedObject(eo)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A commit whose tree holds a .git directory (which a real git refuses to
// check out) is the claim's problem: spec_issue through ErrUnsafeTree, not
// "no outcome", and nothing is written into a .git in the checkout.
func TestCheckoutUnsafeTreeIsTheSpecsProblem(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	st := repo.Storer
	blob := st.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, _ := blob.Writer()
	w.Write([]byte("[core]\n\thooksPath = /tmp\n"))
	w.Close()
	blobHash, err := st.SetEncodedObject(blob)
	if err != nil {
		t.Fatal(err)
	}
	sub := &object.Tree{Entries: []object.TreeEntry{{Name: "config", Mode: filemode.Regular, Hash: blobHash}}}
	subHash := storeObject(t, st, sub, plumbing.TreeObject)
	root := &object.Tree{Entries: []object.TreeEntry{{Name: ".git", Mode: filemode.Dir, Hash: subHash}, {Name: "run.sh", Mode: filemode.Regular, Hash: blobHash}}}
	rootHash := storeObject(t, st, root, plumbing.TreeObject)
	sig := object.Signature{Name: "t", Email: "t@example.invalid", When: time.Unix(0, 0)}
	commit := &object.Commit{Author: sig, Committer: sig, Message: "hostile tree", TreeHash: rootHash}
	commitHash := storeObject(t, st, commit, plumbing.CommitObject)
	if err := st.SetReference(plumbing.NewHashReference("refs/heads/main", commitHash)); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	err = checkoutCommit(context.Background(), LocalPolicy("/"), dir, commitHash.String(), dst, t.TempDir(), CodeLimits())
	if !errors.Is(err, ErrUnsafeTree) {
		t.Fatalf("err = %v, want ErrUnsafeTree", err)
	}
	if _, err := os.Stat(filepath.Join(dst, ".git", "config")); err == nil {
		t.Fatal("a .git/config from the tree was written")
	}
}

// hostileTree commits a tree of the given entries (names may be anything
// a hand-made git object can hold) into a new bare repository.
func hostileTree(t *testing.T, entries []object.TreeEntry, blob string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	st := repo.Storer
	b := st.NewEncodedObject()
	b.SetType(plumbing.BlobObject)
	w, _ := b.Writer()
	w.Write([]byte(blob))
	w.Close()
	bh, err := st.SetEncodedObject(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range entries {
		entries[i].Hash = bh
	}
	rootHash := storeObject(t, st, &object.Tree{Entries: entries}, plumbing.TreeObject)
	sig := object.Signature{Name: "t", Email: "t@example.invalid", When: time.Unix(0, 0)}
	ch := storeObject(t, st, &object.Commit{Author: sig, Committer: sig, Message: "hostile", TreeHash: rootHash}, plumbing.CommitObject)
	return dir, ch.String()
}

// TestCheckoutHostileTrees: tree bombs (too many entries, too many bytes,
// one file too large) and entry names git itself would never write (`..`,
// empty) are ErrUnsafeTree — spec_issue — and nothing is written outside.
func TestCheckoutHostileTrees(t *testing.T) {
	var many []object.TreeEntry
	for i := 0; i < 30; i++ {
		many = append(many, object.TreeEntry{Name: fmt.Sprintf("f%02d", i), Mode: filemode.Regular})
	}
	small := safefs.Limits{MaxEntries: 20, MaxBytes: 1 << 20, MaxFileBytes: 64 << 10}
	big := strings.Repeat("0123456789abcdef", 8<<10) // 128 KiB
	for name, c := range map[string]struct {
		entries []object.TreeEntry
		blob    string
		want    string
	}{
		"entries":   {many, "x", "more than 20 entries"},
		"file size": {[]object.TreeEntry{{Name: "big", Mode: filemode.Regular}}, big, "file limit"},
		"dotdot":    {[]object.TreeEntry{{Name: "..", Mode: filemode.Regular}}, "x", `".."`},
	} {
		t.Run(name, func(t *testing.T) {
			dir, commit := hostileTree(t, c.entries, c.blob)
			dst := t.TempDir()
			err := checkoutCommit(context.Background(), LocalPolicy("/"), dir, commit, dst, t.TempDir(), small)
			if !errors.Is(err, ErrUnsafeTree) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want ErrUnsafeTree naming %q, got %v", c.want, err)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dst), "x")); err == nil {
				t.Fatal("wrote outside the checkout")
			}
		})
	}
}
