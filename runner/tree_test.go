package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

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
	err = checkoutCommit(context.Background(), LocalPolicy("/"), dir, commitHash.String(), dst, t.TempDir())
	if !errors.Is(err, ErrUnsafeTree) {
		t.Fatalf("err = %v, want ErrUnsafeTree", err)
	}
	if _, err := os.Stat(filepath.Join(dst, ".git", "config")); err == nil {
		t.Fatal("a .git/config from the tree was written")
	}
}
