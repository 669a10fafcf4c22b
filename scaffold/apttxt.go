package scaffold

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// OfferAptTxt prints the apt.txt offered (r.AptTxt) on w, one "apt.txt:
// PACKAGE" line each, and writes it to path (a new file: an existing one
// is never overwritten) when path is not "". name prefixes each line.
func OfferAptTxt(w io.Writer, name, path string, r *Result) error {
	if r.AptTxt == nil {
		if path != "" {
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
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("--write-apt-txt: %w (an existing file is not overwritten: the offer includes its lines)", err)
	}
	if _, err := f.Write(r.AptTxt); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: apt.txt written to %s (%s)\n", name, path, strings.Join(pkgs, " "))
	return nil
}
