package imagebuild

import (
	"strings"
	"testing"
)

// TestAptWatchNamesTheAptTxtLine: apt's "Unable to locate package" and
// "Version … was not found" lines, arriving split across writes, are
// reported with the apt.txt line that names the package.
func TestAptWatchNamesTheAptTxtLine(t *testing.T) {
	aptTxt := []byte("# the code's needs\npython3-scikit-learn\nr-base-core r-cran-x=9.9 # pinned\n")
	w := &aptWatch{}
	out := "Reading package lists...\nE: Unable to locate pack" + "age python3-scikit-learn\nE: Version '9.9' for 'r-cran-x' was not found\nE: Unable to locate package python3-scikit-learn\n"
	for _, chunk := range []string{out[:30], out[30:70], out[70:]} {
		w.Write([]byte(chunk))
	}
	got := w.report(aptTxt)
	want := []string{"apt.txt line 2: python3-scikit-learn: no such package in the mirror", "apt.txt line 3: r-cran-x=9.9: no such version in the mirror"}
	for _, s := range want {
		if !strings.Contains(got, s) {
			t.Errorf("report lacks %q:\n%s", s, got)
		}
	}
	if strings.Count(got, "python3-scikit-learn") != 1 {
		t.Errorf("a repeated refusal is reported twice:\n%s", got)
	}
	if r := (&aptWatch{}).report(aptTxt); r != "" {
		t.Errorf("no apt refusal, report %q", r)
	}
}
