package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/dotlab/dotlab/scaffold"
)

// Scaffold runs scaffold.Init, scaffold.OfferAptTxt (aptTxt: the file
// --write-apt-txt names, or "") and WriteScaffold.
func Scaffold(ctx context.Context, stdout, stderr io.Writer, out, aptTxt string, o scaffold.Options) error {
	r, err := scaffold.Init(ctx, o)
	if err != nil {
		return err
	}
	name := "manifest"
	if out != "" {
		name = out
	}
	if err := scaffold.OfferAptTxt(stderr, name, aptTxt, r); err != nil {
		return err
	}
	return WriteScaffold(stdout, stderr, out, r)
}

// WriteScaffold writes the proposed manifest to stdout, or to out (a new
// file: an existing one is never overwritten), and prints on stderr every
// field left for the author ("<JSON path>: placeholder|check: <what to
// do>"), then the verdict. A manifest with placeholders only is written
// with exit status 0 ("not yet valid: N fields left for you that fail validation", the free-text title and citation placeholders counted apart); real
// validation problems are printed too and give exit status 1.
func WriteScaffold(stdout, stderr io.Writer, out string, r *scaffold.Result) error {
	name := "manifest"
	if out == "" {
		if _, err := stdout.Write(r.JSON); err != nil {
			return err
		}
	} else {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("--out: %w (an existing file is not overwritten)", err)
		}
		if _, err := f.Write(r.JSON); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		name = out
	}
	for _, n := range r.Notes {
		fmt.Fprintf(stderr, "%s: %s\n", name, n)
	}
	for _, w := range r.NotListable {
		fmt.Fprintf(stderr, "%s: warning: not listable: %s\n", name, w)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(stderr, "%s: invalid: %s\n", name, p)
	}
	switch n := r.Placeholders(); {
	case len(r.Problems) > 0:
		return &ExitError{Code: 1, Err: fmt.Errorf("%s: written, but invalid beyond its placeholders (%d problem%s above)", name, len(r.Problems), Plural(len(r.Problems)))}
	case !r.Valid:
		b := r.Blocking()
		more := ""
		if free := n - b; free > 0 {
			more = fmt.Sprintf(", and %d free-text placeholder%s (title, citation) that validation passes but a reader sees", free, Plural(free))
		}
		verb := "fail"
		if b == 1 {
			verb = "fails"
		}
		fmt.Fprintf(stderr, "%s: not yet valid: %d field%s left for you that %s validation%s (placeholder lines above); then run dotlab manifest validate\n", name, b, Plural(b), verb, more)
	case n > 0:
		fmt.Fprintf(stderr, "%s: valid manifest spec v%s, but %d field%s left for you (placeholder lines above)\n", name, r.Manifest.SpecVersion, n, Plural(n))
	default:
		fmt.Fprintf(stderr, "%s: valid manifest spec v%s: check the lines above before listing it\n", name, r.Manifest.SpecVersion)
	}
	return nil
}
