// Package witnesstest runs a real, independent c2sp.org/tlog-witness
// witness for tests: transparency-dev/witness's omniwitness, built with
// `go install` of the pinned module version (Version) from the Go module
// proxy and run on loopback, configured to witness one log (its origin and
// verifier key) with a fresh Ed25519 cosignature/v1 key. The tests of
// `dotlab serve --witness` and `dotlab verify --witness-key` use it
// (docs/verification.md "Witnesses").
//
// The build needs the go command and the module proxy: a test skips
// without them outside CI and fails under CI=true.
package witnesstest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab/tlogfmt"
	"golang.org/x/mod/sumdb/note"
)

// Module and Version pin the witness implementation: the module proxy
// serves github.com/transparency-dev/witness as pseudo-versions only.
const (
	Module  = "github.com/transparency-dev/witness"
	Version = "v0.0.0-20260720115447-2e1c6971d19e"
	Command = Module + "/cmd/omniwitness"
)

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Binary returns the omniwitness binary of Version, built once per test
// binary into <user cache dir>/dotlab/omniwitness-<Version> (kept between
// runs: a second run does not build again).
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { buildBin, buildErr = build() })
	if buildErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must build %s@%s: %v", Command, Version, buildErr)
		}
		t.Skipf("cannot build %s@%s: %v", Command, Version, buildErr)
	}
	return buildBin
}

func build() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "dotlab", "omniwitness-"+Version)
	bin := filepath.Join(dir, "omniwitness")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(goBin, "install", Command+"@"+Version)
	cmd.Dir = tmp // outside any module: the witness builds with its own go.mod
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install: %v\n%s", err, out)
	}
	// Renamed into place, so that test binaries building at once never run
	// a half-written file.
	return bin, os.Rename(filepath.Join(tmp, "omniwitness"), bin)
}

// Witness is a running omniwitness.
type Witness struct {
	URL  string // its submission prefix: POST URL + "/add-checkpoint"
	Key  string // its cosignature/v1 verifier key
	Name string // its key name
	// Flag is the `dotlab serve --witness` value: URL=Key.
	Flag string
}

// Start runs an omniwitness on a free loopback port until the test ends,
// witnessing the log whose note verifier key is logKey (its origin is the
// key's name), with a new key named name and its state in a SQLite file
// in a test directory. It waits until the witness accepts connections.
func Start(t testing.TB, name, logKey string) *Witness {
	t.Helper()
	bin := Binary(t)
	lv, err := note.NewVerifier(logKey)
	if err != nil {
		t.Fatalf("log key: %v", err)
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile, logsFile := filepath.Join(dir, "witness.key"), filepath.Join(dir, "logs.yaml")
	logs := fmt.Sprintf("Logs:\n  - Origin: %s\n    PublicKey: %s\n", strconv.Quote(lv.Name()), strconv.Quote(logKey))
	if err := os.WriteFile(keyFile, []byte(skey), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logsFile, []byte(logs), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var out bytes.Buffer
	cmd := exec.Command(bin, "--listen="+addr, "--metrics_listen=", "--db_file="+filepath.Join(dir, "witness.db"),
		"--private_key_path="+keyFile, "--additional_logs="+logsFile, "--logtostderr")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("omniwitness output:\n%s", out.String())
		}
	})
	waitListening(t, addr, &out)
	w := &Witness{URL: "http://" + addr, Key: cosignatureKey(t, name, vkey), Name: name}
	w.Flag = w.URL + "=" + w.Key
	return w
}

// cosignatureKey turns a note Ed25519 verifier key (type 0x01) into the
// witness's cosignature/v1 key (type 0x04) of the same public key, as the
// witness's own key tool does.
func cosignatureKey(t testing.TB, name, vkey string) string {
	parts := strings.SplitN(vkey, "+", 3) // name, key id, base64 key (which may hold '+')
	raw, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
	if len(parts) != 3 || err != nil || len(raw) != 33 || raw[0] != 0x01 {
		t.Fatalf("witness verifier key %q: not an Ed25519 note key", vkey)
	}
	return tlogfmt.CosignatureVerifierKey(name, raw[1:])
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitListening(t testing.TB, addr string, out *bytes.Buffer) {
	t.Helper()
	for i := 0; i < 300; i++ {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("omniwitness did not listen on %s within 30 s:\n%s", addr, out.String())
}
