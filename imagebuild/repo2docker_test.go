package imagebuild

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const h64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestRequirementsMustBePinnedAndHashed(t *testing.T) {
	ok := "# pinned\nnumpy==1.26.4 \\\n    --hash=sha256:" + h64 + " \\\n    --hash=sha256:" + strings.Repeat("f", 64) + "\nrequests[socks]===2.31.0 --hash=sha256:" + h64 + " ; python_version >= \"3.9\"\n"
	if err := CheckRequirements([]byte(ok)); err != nil {
		t.Fatalf("pinned and hashed refused: %v", err)
	}
	for name, c := range map[string]struct{ src, want string }{
		"unhashed":   {"pandas==2.1.0\n", "has no --hash"},
		"unpinned":   {"pandas>=2 --hash=sha256:" + h64 + "\n", "is not pinned"},
		"bare":       {"pandas\n", "is not pinned"},
		"url":        {"pkg @ https://example.org/pkg.whl --hash=sha256:" + h64 + "\n", "is not pinned"},
		"index":      {"--index-url https://evil.example/simple\n", "option --index-url"},
		"include":    {"-r other.txt\n", "option -r"},
		"editable":   {"-e .\n", "option -e"},
		"short hash": {"a==1 --hash=sha256:abc\n", "--hash=sha256:<64 hex>"},
		"line no":    {"a==1 --hash=sha256:" + h64 + "\n\nb==2\n", "line 3"},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckRequirements([]byte(c.src))
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%q: %v (want %q)", c.src, err, c.want)
			}
		})
	}
}

func TestAptTxtAndDescription(t *testing.T) {
	pkgs, err := ParseAptTxt([]byte("# tools\npython3-sklearn\nlibgomp1=12.2.0-14  python3-sklearn\n"))
	if err != nil || strings.Join(pkgs, " ") != "libgomp1=12.2.0-14 python3-sklearn" {
		t.Fatalf("apt.txt: %q %v", pkgs, err)
	}
	if _, err := ParseAptTxt([]byte("curl; rm -rf /\n")); !errors.Is(err, ErrRefused) {
		t.Fatalf("shell in apt.txt: %v", err)
	}
	desc := "Package: analysis\nDepends: R (>= 4.0), methods,\n    dotlabhello (>= 0.1)\nImports: httr,\n  jsonlite\nSuggests: testthat\n"
	r, err := ParseDescription([]byte(desc))
	if err != nil || strings.Join(r, " ") != "dotlabhello httr jsonlite" {
		t.Fatalf("DESCRIPTION: %q %v", r, err)
	}
}

func TestPackageFilesRefuseWhatIsNotRead(t *testing.T) {
	for _, name := range []string{"environment.yml", "Pipfile", "postBuild", "Dockerfile"} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "apt.txt"), []byte("curl\n"), 0o644)
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644)
		_, err := ReadPackageFiles(dir)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "Containerfile") || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ReadPackageFiles(t.TempDir()); !errors.Is(err, ErrRefused) {
		t.Errorf("empty package: %v", err)
	}
	// binder/ is read instead of the top level, as repo2docker does.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "environment.yml"), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(dir, "binder"), 0o755)
	os.WriteFile(filepath.Join(dir, "binder", "apt.txt"), []byte("curl\n"), 0o644)
	pf, err := ReadPackageFiles(dir)
	if err != nil || strings.Join(pf.Apt, " ") != "curl" {
		t.Fatalf("binder/: %+v %v", pf, err)
	}
	plan, err := pf.Plan("lab/base@sha256:"+h64, Repositories{AptSources: []string{"deb [trusted=yes] http://127.0.0.1:8080/ ./"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseContainerfile(plan.Containerfile); err != nil {
		t.Fatalf("the generated Containerfile breaks the rules: %v\n%s", err, plan.Containerfile)
	}
	if len(plan.Egress) != 1 || plan.Egress[0] != "http://127.0.0.1:8080" {
		t.Fatalf("egress: %q", plan.Egress)
	}
}
