package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestImageBuildAndRerun drives the commands as a user would: build an image
// from a directory, pin it in a manifest, rerun it (table and --json), and
// get exit 1 for an invalid manifest.
func TestImageBuildAndRerun(t *testing.T) {
	testfix.Need(t, true, "runc", "busybox")
	cache := t.TempDir()
	rootfs := testfix.BusyboxRootfs(t)
	out, errOut, code := runCLI(t, "image", "build", rootfs, "--ref", "localhost/test/busybox", "--cache", cache)
	if code != 0 {
		t.Fatalf("image build: %d %s", code, errOut)
	}
	digest := strings.Fields(out)[0]
	again, _, _ := runCLI(t, "image", "build", rootfs, "--ref", "localhost/test/busybox", "--cache", t.TempDir())
	if strings.Fields(again)[0] != digest {
		t.Fatalf("image build is not deterministic: %s vs %s", again, out)
	}
	list, _, _ := runCLI(t, "image", "list", "--cache", cache)
	if !strings.Contains(list, digest) {
		t.Fatalf("image list: %s", list)
	}

	data := []byte("x\n1\n2\n")
	local := t.TempDir()
	dataPath := filepath.Join(local, "d.csv")
	os.WriteFile(dataPath, data, 0o644)
	sum := sha256.Sum256(data)
	repoDir := filepath.Join(local, "repo")
	r, _ := git.PlainInit(repoDir, false)
	os.WriteFile(filepath.Join(repoDir, "run.sh"), []byte(`echo '{"total": 3}' > "$DOTLAB_OUT_DIR/results.json"`), 0o644)
	wt, _ := r.Worktree()
	wt.Add("run.sh")
	h, err := wt.Commit("c", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.org", When: time.Unix(1e9, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`{"spec_version":"0.1","title":"cli","source":{"citation":"test"},
 "datasets":[{"name":"d","url":"file://%s","sha256":"%s"}],
 "code":{"repository":"%s","commit":"%s"},
 "environment":{"image":"localhost/test/busybox@%s"},
 "entrypoint":["sh","run.sh"],
 "targets":[{"name":"total","value":3.0,"tolerance":{"type":"absolute","value":0}}]}`,
		dataPath, hex.EncodeToString(sum[:]), repoDir, h, digest)
	mpath := filepath.Join(t.TempDir(), "m.json")
	os.WriteFile(mpath, []byte(manifest), 0o644)

	outDir := filepath.Join(t.TempDir(), "run")
	table, errOut, code := runCLI(t, "rerun", mpath, "--cache", cache, "--out", outDir, "--allow-local", local)
	if code != 0 || !strings.Contains(table, "outcome: reproduced") || !strings.Contains(table, "total") {
		t.Fatalf("rerun: code %d\n%s\n%s", code, table, errOut)
	}
	for _, f := range []string{"run.json", "logs.jsonl", "out/results.json"} {
		if _, err := os.Stat(filepath.Join(outDir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	js, _, code := runCLI(t, "rerun", mpath, "--cache", cache, "--out", filepath.Join(t.TempDir(), "run2"), "--json", "--allow-local", local)
	var body dotlab.RunBody
	if code != 0 || json.Unmarshal([]byte(js), &body) != nil || body.Outcome != dotlab.OutcomeReproduced || body.Comparisons[0].Rerun != "3" {
		t.Fatalf("rerun --json: code %d %s", code, js)
	}

	// --strict-fetch refuses the file:// dataset: recorded as spec_issue, exit 0.
	strict, _, code := runCLI(t, "rerun", mpath, "--cache", cache, "--out", filepath.Join(t.TempDir(), "run3"), "--strict-fetch")
	if code != 0 || !strings.Contains(strict, "outcome: spec_issue") || !strings.Contains(strict, "refused") {
		t.Fatalf("strict: code %d %s", code, strict)
	}
	// --strict-fetch and --allow-local contradict each other: refused up front.
	if _, errOut, code := runCLI(t, "rerun", mpath, "--cache", cache, "--strict-fetch", "--allow-local", local); code == 0 || !strings.Contains(errOut, "--strict-fetch refuses local files") {
		t.Fatalf("strict with --allow-local: code %d %s", code, errOut)
	}
	// --allow-local must name a directory.
	if _, errOut, code := runCLI(t, "rerun", mpath, "--cache", cache, "--allow-local", dataPath); code == 0 || !strings.Contains(errOut, "not a directory") {
		t.Fatalf("--allow-local FILE: code %d %s", code, errOut)
	}
	// Without --allow-local, local files are refused by default.
	noLocal, _, code := runCLI(t, "rerun", mpath, "--cache", cache, "--out", filepath.Join(t.TempDir(), "run4"))
	if code != 0 || !strings.Contains(noLocal, "outcome: spec_issue") || !strings.Contains(noLocal, "--allow-local") {
		t.Fatalf("no --allow-local: code %d %s", code, noLocal)
	}
	// A file outside --allow-local (directly, by '..', or by a symlink inside
	// the root) is refused and its hash is never computed or printed.
	shadowSum := sha256.Sum256([]byte("x"))
	os.Symlink("/etc/shadow", filepath.Join(local, "link"))
	for _, u := range []string{"file:///etc/shadow", "file://" + local + "/../../etc/shadow", "file://" + local + "/link"} {
		m := strings.Replace(manifest, "file://"+dataPath, u, 1)
		m = strings.Replace(m, hex.EncodeToString(sum[:]), hex.EncodeToString(shadowSum[:]), 1)
		p := filepath.Join(t.TempDir(), "shadow.json")
		os.WriteFile(p, []byte(m), 0o644)
		outD := filepath.Join(t.TempDir(), "run5")
		got, _, code := runCLI(t, "rerun", p, "--cache", cache, "--out", outD, "--allow-local", local)
		if code != 0 || !strings.Contains(got, "outcome: spec_issue") || !strings.Contains(got, "refused") {
			t.Fatalf("%s: code %d %s", u, code, got)
		}
		if real, err := os.ReadFile("/etc/shadow"); err == nil {
			realSum := sha256.Sum256(real)
			logs, _ := os.ReadFile(filepath.Join(outD, "logs.jsonl"))
			if strings.Contains(got+string(logs), hex.EncodeToString(realSum[:])) {
				t.Fatalf("%s: the real hash of /etc/shadow was printed", u)
			}
		}
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(strings.Replace(manifest, `"entrypoint"`, `"entrypoint2"`, 1)), 0o644)
	_, errOut, code = runCLI(t, "rerun", bad, "--cache", cache)
	if code != 1 || !strings.Contains(errOut, bad+": $") {
		t.Fatalf("invalid manifest: code %d %s", code, errOut)
	}
}
