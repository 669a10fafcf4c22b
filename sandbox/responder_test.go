package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/sandbox"
)

// TestMain lets this test binary be the download responder the sandbox
// re-executes (sandbox.ResponderArg).
func TestMain(m *testing.M) {
	sandbox.RunResponderIfAsked()
	os.Exit(m.Run())
}

// TestResponderBusyboxHTTP: with busybox wget through http_proxy, a pinned
// http URL is answered with its bytes, an undeclared URL and a POST are
// refused, and every request is in Result.Downloads.
func TestResponderBusyboxHTTP(t *testing.T) {
	rt, e := setup(t, "runc")
	file := filepath.Join(t.TempDir(), "blob")
	os.WriteFile(file, []byte("x,y\n1,2\n"), 0o444)
	spec := sandbox.Spec{
		Rootfs: e.rootfs, CodeDir: e.code, DataDir: e.data,
		Args: []string{"/bin/sh", "-c", `env | grep -i proxy; wget -q -O - http://data.example.org/t.csv; echo "rc=$?";
wget -q -O - http://data.example.org/other.csv; echo "rc=$?"; wget -q -O - --post-data=a=1 http://data.example.org/t.csv; echo "rc=$?"`},
		ImageEnv:  []string{imagestore.DefaultPath},
		Limits:    small,
		Downloads: []sandbox.Download{{URL: "http://data.example.org/t.csv", File: file}},
	}
	var stdout, stderr strings.Builder
	res, err := rt.Run(context.Background(), spec, t.TempDir(), sandbox.IO{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stdout: %s\nstderr: %s\nevents: %+v", stdout.String(), stderr.String(), res.Downloads)
	if !strings.Contains(stdout.String(), "x,y\n1,2\nrc=0") {
		t.Errorf("pinned URL not served")
	}
}
