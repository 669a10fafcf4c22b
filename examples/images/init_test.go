package images

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/scaffold"
)

// TestInitAgainstTheExampleImages runs manifest init's reading of the code
// against the real example images (their dpkg file lists, read from the
// rootfs in the store): the scientific Python image has what the Longley
// package imports but not what executing a notebook needs (jupyter,
// jupyter-nbconvert, ipykernel), and the R image has what the BCG package
// and an R Markdown report need (metafor, knitr, rmarkdown, pandoc). The
// archive's Contents index is not consulted here (no network in tests).
func TestInitAgainstTheExampleImages(t *testing.T) {
	testfix.Need(t, true, "debootstrap", "chroot", "go", "python3", "Rscript")
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds two Debian images (-short)")
	}
	varDir := imagesVar(t)
	bin := dotlabBinary(t)
	refs := map[string]string{}
	for _, c := range []struct {
		recipe, pkg string
		status      map[string]string
	}{
		{"python-sci", "../claims/longley-1967/code", map[string]string{"python3": scaffold.NeedInImage,
			"matplotlib": scaffold.NeedInImage, "pandas": scaffold.NeedInImage, "statsmodels": scaffold.NeedInImage}},
		{"python-sci", "../../scaffold/testdata/init/notebook", map[string]string{"statsmodels": scaffold.NeedInImage, "matplotlib": scaffold.NeedInImage,
			"jupyter": scaffold.NeedMissing, "jupyter-nbconvert": scaffold.NeedMissing, "ipykernel": scaffold.NeedMissing}},
		{"r", "../claims/viechtbauer-2010-bcg/code", map[string]string{"Rscript": scaffold.NeedInImage, "metafor": scaffold.NeedInImage}},
		{"r", "../../scaffold/testdata/init/rmarkdown", map[string]string{"Rscript": scaffold.NeedInImage, "knitr": scaffold.NeedInImage,
			"metafor": scaffold.NeedInImage, "rmarkdown": scaffold.NeedInImage, "pandoc": scaffold.NeedInImage}},
	} {
		if refs[c.recipe] == "" {
			refs[c.recipe] = buildRecipe(t, bin, varDir, c.recipe)
		}
		ref := refs[c.recipe]
		res, err := scaffold.Init(context.Background(), scaffold.Options{Source: c.pkg, Image: ref, CacheDir: filepath.Join(varDir, "cache"), Targets: []string{"x=1"}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, n := range res.Needs {
			got[n.Name] = n.Status
		}
		for name, want := range c.status {
			if got[name] != want {
				t.Errorf("%s on %s: %s is %q, want %q (needs %+v)", c.pkg, c.recipe, name, got[name], want, res.Needs)
			}
		}
		if len(got) != len(c.status) {
			t.Errorf("%s on %s: needs %v, want %v", c.pkg, c.recipe, got, c.status)
		}
	}
}
