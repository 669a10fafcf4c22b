// Package registrytest starts real OCI distribution registries (Debian's
// docker-registry, CNCF distribution) on loopback for tests: one that takes
// pushes with htpasswd basic auth and one that serves the same storage
// read-only to anonymous clients, both over TLS with a test certificate
// authority, as a lab's registry and its public mirror would.
package registrytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/testing/testfix"
	"golang.org/x/crypto/bcrypt"
)

// Pair is a push registry and an anonymous read-only registry over one storage.
type Pair struct {
	// Push is HOST:PORT of the registry that needs User/Password.
	Push string
	// Pull is HOST:PORT of the registry that anyone may read.
	Pull           string
	User, Password string
	// CAFile is the PEM file of the test CA both registries' certificates chain to.
	CAFile string
	// DockerConfig is a directory holding a Docker config.json with the
	// credentials for Push (set DOCKER_CONFIG to it).
	DockerConfig string
}

// Start starts the pair for the test (stopped when it ends). It needs
// docker-registry: skipped outside CI without it, a failure in CI.
func Start(t testing.TB) *Pair {
	t.Helper()
	testfix.Need(t, false, "docker-registry")
	dir := t.TempDir()
	p := &Pair{User: "lab", Password: "s3cret-push", CAFile: filepath.Join(dir, "ca.pem"), DockerConfig: filepath.Join(dir, "docker")}
	cert, key := writeCA(t, dir, p.CAFile)
	hash, err := bcrypt.GenerateFromPassword([]byte(p.Password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	writeFile(t, htpasswd, p.User+":"+string(hash)+"\n")
	storage := filepath.Join(dir, "storage")
	p.Push = start(t, dir, "push", fmt.Sprintf("auth:\n  htpasswd:\n    realm: dotlab-test\n    path: %s\n", htpasswd), storage, "", cert, key)
	p.Pull = start(t, dir, "pull", "", storage, "  maintenance:\n    readonly:\n      enabled: true\n", cert, key)
	auth := base64.StdEncoding.EncodeToString([]byte(p.User + ":" + p.Password))
	if err := os.MkdirAll(p.DockerConfig, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(p.DockerConfig, "config.json"), fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, p.Push, auth))
	return p
}

// start runs one docker-registry with the given auth section and storage.
func start(t testing.TB, dir, name, auth, storage, storageExtra, cert, key string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n%s"+
		"http:\n  addr: %s\n  tls:\n    certificate: %s\n    key: %s\n%s", storage, storageExtra, addr, cert, key, auth)
	path := filepath.Join(dir, name+".yml")
	writeFile(t, path, cfg)
	cmd := exec.Command("docker-registry", "serve", path)
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			conn.Close()
			return addr
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(dir, name+".log"))
	t.Fatalf("docker-registry %s did not listen on %s:\n%s", name, addr, log)
	return ""
}

// writeCA writes a test CA to caFile and a server certificate for
// 127.0.0.1 and localhost signed by it; it returns the certificate and key paths.
func writeCA(t testing.TB, dir, caFile string) (string, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dotlab test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	writeFile(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return certFile, keyFile
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
