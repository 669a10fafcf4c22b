package imagebuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dotlab/dotlab/imagestore"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// BuildPackage builds the repo2docker files of the package in dir over
// base (NAME@sha256:…): ReadPackageFiles, Plan, then Build with the plan's
// egress hosts added to o.Egress. A build of the same plan (the same base
// digest, package sets, files and repositories) whose image is still in
// the store is reused (Result.Cached): the cache key is the SHA-256 of the
// generated Containerfile and files, kept in STORE/builds/<key>.
func BuildPackage(ctx context.Context, dir, base string, repos Repositories, o Options) (Result, error) {
	if _, err := imagestore.ParseRef(base); err != nil {
		return Result{}, fmt.Errorf("--base %s: %w (the base is pinned by digest: `dotlab image list`)", base, err)
	}
	pf, err := ReadPackageFiles(dir)
	if err != nil {
		return Result{}, err
	}
	plan, err := pf.Plan(base, repos)
	if err != nil {
		return Result{}, err
	}
	key := plan.key(o.Egress)
	keyFile := filepath.Join(o.Store.Dir(), "builds", key)
	if d, err := readCached(o.Store, keyFile); err == nil {
		return Result{Digest: d, Cached: true}, o.Store.Name(d, o.Ref)
	}
	tmp, err := os.MkdirTemp(filepath.Join(o.Store.Dir(), "tmp"), "package-*")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)
	for name, data := range plan.Files {
		p := filepath.Join(tmp, "dotlab", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return Result{}, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return Result{}, err
		}
	}
	if err := os.MkdirAll(filepath.Join(tmp, "dotlab"), 0o755); err != nil {
		return Result{}, err
	}
	o.Context, o.Containerfile, o.Egress = tmp, plan.Containerfile, append(plan.Egress, o.Egress...)
	watch := &aptWatch{}
	if o.Log == nil {
		o.Log = io.Discard
	}
	o.Log = io.MultiWriter(o.Log, watch)
	res, err := Build(ctx, o)
	if err != nil {
		aptTxt := readAptTxt(pf.Dir)
		if r := watch.report(aptTxt); r != "" {
			return res, fmt.Errorf("%s\n%w", r, err)
		}
		return res, err
	}
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o755); err == nil {
		os.WriteFile(keyFile, []byte(res.Digest.String()+"\n"), 0o644)
	}
	return res, nil
}

// key is the plan's cache key (hex SHA-256 of the Containerfile, the
// files in name order and the extra egress hosts).
func (pl *Plan) key(extra []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "containerfile %d\n%s", len(pl.Containerfile), pl.Containerfile)
	names := make([]string, 0, len(pl.Files))
	for n := range pl.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "file %q %d\n%s", n, len(pl.Files[n]), pl.Files[n])
	}
	fmt.Fprintf(h, "egress %s\n", strings.Join(extra, " "))
	return hex.EncodeToString(h.Sum(nil))
}

// readCached returns the digest recorded in keyFile when its image is
// still in the store.
func readCached(s *imagestore.Store, keyFile string) (d v1.Hash, err error) {
	data, err := os.ReadFile(keyFile)
	if err != nil {
		return d, err
	}
	if d, err = imagestore.ParseDigest(strings.TrimSpace(string(data))); err != nil {
		return d, err
	}
	_, err = s.Image(d)
	return d, err
}

// readAptTxt is the package's apt.txt as ReadPackageFiles read it (inside
// dir, no symbolic link, bounded), or nil: the failed build's report names
// its lines.
func readAptTxt(dir string) []byte {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	data, _ := readBounded(root, ".", "apt.txt", "apt.txt")
	return data
}
