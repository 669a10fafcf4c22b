package imagebuild

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/testfix"
)

// TestAptTxtRefusesAptActionsAndOddVersions: a trailing '-' (remove) or a
// trailing '+' after a version, an architecture and a version outside
// Debian's charset are refused naming the line; names with '.', '+' are
// Debian names and pass (the build passes them as exact names).
func TestAptTxtRefusesAptActionsAndOddVersions(t *testing.T) {
	for _, in := range []string{"tzdata-\n", "bash\nfoo=1.0-\n", "foo=1.0+\n", "bash:amd64\n", "foo=v1\n", "foo=1.0=2\n", "foo=\n", "Bash\n"} {
		_, err := ParseAptTxt([]byte(in))
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "apt.txt line") {
			t.Errorf("%q: %v", in, err)
		}
	}
	got, err := ParseAptTxt([]byte("g++\nlibstdc++6=12.2.0-14\npython3-sk.....\nlibfoo1.2=1:2.0~rc1+dfsg-3\n"))
	if err != nil || len(got) != 4 {
		t.Fatalf("Debian names refused: %q %v", got, err)
	}
}

// TestAptStepInstallsExactNames: the generated step passes every
// unversioned apt.txt word as '?exact-name(NAME)' (never a regular
// expression) and checks after the install that every word is installed.
func TestAptStepInstallsExactNames(t *testing.T) {
	pf := &PackageFiles{Apt: []string{"python3-sk.....", "zlib1g=1:1.2.13.dfsg-1"}}
	plan, err := pf.Plan("lab/base@sha256:"+h64, Repositories{})
	if err != nil {
		t.Fatal(err)
	}
	cf := string(plan.Containerfile)
	if !strings.Contains(cf, `install -y -qq '?exact-name(python3-sk.....)' 'zlib1g=1:1.2.13.dfsg-1';`) {
		t.Fatalf("install words:\n%s", cf)
	}
	if !strings.Contains(cf, aptInstalledCheck(pf.Apt)) {
		t.Fatalf("no installed check:\n%s", cf)
	}
	if _, err := ParseContainerfile(plan.Containerfile); err != nil {
		t.Fatalf("the generated Containerfile breaks the rules: %v", err)
	}
}

// TestAptInstalledCheckNeedsEveryWordInstalledAsNamed runs the check of
// the apt step with this machine's real dpkg database: an installed
// package (at its version) passes; a word apt-get would read as a pattern,
// a package not installed and a wrong version fail naming the word.
func TestAptInstalledCheckNeedsEveryWordInstalledAsNamed(t *testing.T) {
	testfix.Need(t, false, "dpkg-query", "sh")
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "dpkg").Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("dpkg-query dpkg: %v", err)
	}
	run := func(words ...string) (string, error) {
		b, err := exec.Command("sh", "-c", "set -e; "+aptInstalledCheck(words)).CombinedOutput()
		return string(b), err
	}
	if msg, err := run("dpkg", "dpkg="+string(out)); err != nil {
		t.Fatalf("installed packages fail the check: %v %s", err, msg)
	}
	for _, bad := range []string{"dpk.", "dpkg=0.0-0", "zlib1g-de.", "dotlab-no-such-package"} {
		msg, err := run("dpkg", bad)
		if err == nil || !strings.Contains(msg, "apt.txt: "+bad+" is not installed") {
			t.Errorf("%s: err %v, %q", bad, err, msg)
		}
	}
}
