package scaffold

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// OfferAptTxt prints the apt.txt offered (r.AptTxt) on w, one "apt.txt:
// PACKAGE" line each, and writes it to path (a new file: an existing one
// is never overwritten, one that already holds the offer is left as it
// is) when path is not "". name prefixes each line. With the code pinned
// by a git commit that holds no apt.txt, a check line says to commit it.
func OfferAptTxt(w io.Writer, name, path string, r *Result) error {
	if r.AptTxt == nil {
		switch {
		case path == "":
		case r.AptTxtInCode:
			fmt.Fprintf(w, "%s: apt.txt: nothing to add (%s not written): the package's apt.txt already names every Debian package known for what the image lacks\n", name, path)
		default:
			fmt.Fprintf(w, "%s: apt.txt: nothing to add (%s not written): the image has what the code needs, or no Debian package is known for it\n", name, path)
		}
		return nil
	}
	pkgs := aptNames(string(r.AptTxt))
	for _, p := range pkgs {
		fmt.Fprintf(w, "%s: apt.txt: %s\n", name, p)
	}
	if path == "" {
		fmt.Fprintf(w, "%s: apt.txt offered (%d package%s): write it with --write-apt-txt PKG/apt.txt, then build the image with dotlab image build (see %s#%s)\n",
			name, len(pkgs), plural(len(pkgs)), HowTo, SectionMissing)
		return nil
	}
	written, err := writeAptTxt(path, r.AptTxt)
	if err != nil {
		return err
	}
	if written {
		fmt.Fprintf(w, "%s: apt.txt written to %s (%s)\n", name, path, strings.Join(pkgs, " "))
	} else {
		fmt.Fprintf(w, "%s: apt.txt: %s already holds the offer (%s): not written again\n", name, path, strings.Join(pkgs, " "))
	}
	if c := r.Manifest.Code.Commit; c != "" && !r.AptTxtInCode {
		fmt.Fprintf(w, "%s: $.code.commit: check: commit apt.txt: commit %s does not hold it (a runner's checkout and the published package lack it); commit it, push, and run init again to pin the commit that does\n", name, c)
	}
	return nil
}

// writeAptTxt writes body to path, a new file; an existing file that
// already holds exactly body is left as it is (written false), any other
// is never overwritten (an error saying so).
func writeAptTxt(path string, body []byte) (written bool, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		if old, rerr := os.ReadFile(path); rerr == nil && bytes.Equal(old, body) {
			return false, nil
		}
	}
	if err != nil {
		return false, fmt.Errorf("--write-apt-txt: %w (an existing file is not overwritten: the offer includes its lines)", err)
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}
