package scaffold

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/lazyre"
)

// Bounds of the data files init hashes: the schema's 256 datasets, and 64
// GiB in all (a runner's default download cap).
const (
	MaxDataFiles = 256
	MaxDataBytes = 64 << 30
	// MaxTreeEntries bounds the walk of a package tree for its file names.
	MaxTreeEntries = 500_000
)

// dataFile is one file found under the data directory.
type dataFile struct {
	rel  string // slash-separated, relative to the data directory
	size int64
}

// listData walks dir (refusing symbolic links, skipping .git) and returns
// its regular files, held to MaxDataFiles and MaxDataBytes.
func listData(dir string) ([]dataFile, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("data directory %s is not a directory (a symbolic link is not followed)", dir)
	}
	var files []dataFile
	var total int64
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return fmt.Errorf("data file %s is a symbolic link: refused (copy the file it points at)", p)
		case !d.Type().IsRegular():
			return fmt.Errorf("data file %s is not a regular file", p)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		files = append(files, dataFile{rel: rel, size: info.Size()})
		if len(files) > MaxDataFiles {
			return fmt.Errorf("more than %d data files under %s (the most a manifest lists): pass --data a directory holding only the inputs", MaxDataFiles, dir)
		}
		if total > MaxDataBytes {
			return fmt.Errorf("the data files under %s exceed %d GiB in all", dir, MaxDataBytes>>30)
		}
		return nil
	})
	return files, err
}

// hashFile is the lowercase hex SHA-256 of a regular file's bytes, opened
// through an os.Root at dir so that a symbolic link swapped in cannot lead
// the read out of it.
func hashFile(root *os.Root, rel string) (string, error) {
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", rel)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// HashFile is the lowercase hex SHA-256 of the file at p (a code archive).
func HashFile(p string) (string, error) {
	root, err := os.OpenRoot(filepath.Dir(p))
	if err != nil {
		return "", err
	}
	defer root.Close()
	return hashFile(root, filepath.Base(p))
}

var nameUnsafe = lazyre.New(`[^A-Za-z0-9_.-]`)

// datasetName derives a unique dataset name from a data path.
func datasetName(rel string, taken map[string]bool) string {
	base := nameUnsafe().ReplaceAllString(strings.ReplaceAll(rel, "/", "_"), "_")
	if len(base) > 60 {
		base = base[len(base)-60:]
	}
	name := base
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	taken[name] = true
	return name
}

// datasetURL is base joined with the path's segments, each escaped; "" without base.
func datasetURL(base, rel string) string {
	if base == "" {
		return ""
	}
	segs := strings.Split(rel, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.TrimSuffix(base, "/") + "/" + path.Join(segs...)
}

// proposeDatasets hashes every file under dir that inCode does not report
// as pinned inside the code, into datasets at /work/data/<path>.
func (b *builder) proposeDatasets(dir, codePrefix string, inCode func(string) bool) error {
	files, err := listData(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	taken := map[string]bool{}
	var pinned int
	for _, f := range files {
		if inCode != nil && inCode(path.Join(codePrefix, f.rel)) {
			pinned++
			continue
		}
		sum, err := hashFile(root, f.rel)
		if err != nil {
			return err
		}
		i := len(b.m.Datasets)
		d := dotlab.Dataset{Name: datasetName(f.rel, taken), SHA256: sum, Path: f.rel, URL: datasetURL(b.opts.DataURL, f.rel)}
		at := fmt.Sprintf("$.datasets[%d].url", i)
		if d.URL == "" {
			d.URL = "REPLACE-with-the-https-URL-of-" + nameUnsafe().ReplaceAllString(f.rel, "_")
			b.placeholder(at, "https://standin.invalid/"+d.Name, "replace with the https URL where %s is published (its bytes must hash to the sha256 given; a file:// URL works for dotlab rerun --allow-local but is not listable)", f.rel)
		} else {
			b.check(at, "%s must serve exactly these bytes", d.URL)
		}
		b.m.Datasets = append(b.m.Datasets, d)
	}
	if pinned > 0 {
		b.check("$.datasets", "%d file%s under %s %s tracked at the pinned commit, so pinned inside the code (at /work/code/%s): no dataset entry needed", pinned, plural(pinned), codePrefix, map[bool]string{true: "is", false: "are"}[pinned == 1], codePrefix)
	}
	if len(b.m.Datasets) > 0 {
		b.check("$.datasets", "the package finds these files read-only at /work/data/<path> ($DOTLAB_DATA_DIR), not next to its code: a package that reads data/… relative to its code needs them inside the code instead (then remove the entries)")
	}
	return nil
}
