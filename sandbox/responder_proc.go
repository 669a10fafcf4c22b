package sandbox

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dotlab/dotlab"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Download is one pinned URL the sandbox answers (Spec.Downloads): the URL
// as the manifest gives it and the host file holding its verified bytes
// (the runner's cache; opened by the responder before it drops root).
type Download struct {
	URL  string
	File string
}

// ResponderArg is the hidden first argument on which a DotLab binary runs
// as the download responder (RunResponderIfAsked); the sandbox re-executes
// its own binary (Runtime.ResponderBinary) with it.
const ResponderArg = "__dotlab-download-responder"

// Responder identity: the uid and gid the responder process drops to, next
// to the analysis's UID and GID but not equal, so that neither can signal
// or ptrace the other.
const (
	ResponderUID = UID + 1
	ResponderGID = GID + 1
)

// CAPath is where the run's CA certificate is inside the sandbox (a
// read-only bind of the bundle's ca directory at /run/dotlab), and what
// SSL_CERT_FILE, REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE name.
const (
	caMountDir = "/run/dotlab"
	CAPath     = caMountDir + "/ca.pem"
)

// downloadEnv is what a run with pinned downloads adds to the analysis's
// environment: the proxy in both cases (libcurl reads only the lower-case
// http_proxy), an empty no_proxy so that no host bypasses it, and the CA
// file for OpenSSL (Python's ssl, urllib, R's openssl), requests, and
// libcurl (R's download.file and the curl package behind httr read
// CURL_CA_BUNDLE).
func downloadEnv() map[string]string {
	proxy := "http://127.0.0.1:" + strconv.Itoa(ResponderPort)
	return map[string]string{
		"http_proxy": proxy, "https_proxy": proxy, "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy,
		"no_proxy": "", "NO_PROXY": "",
		"SSL_CERT_FILE": CAPath, "REQUESTS_CA_BUNDLE": CAPath, "CURL_CA_BUNDLE": CAPath,
	}
}

// downloadEnvOrder is the order downloadEnv's variables are written in.
var downloadEnvOrder = []string{"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY",
	"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}

// responderConfig is what the parent writes on the responder's stdin.
type responderConfig struct {
	Files  []responderFile `json:"files"`
	Leaves []responderLeaf `json:"leaves"`
	Root   string          `json:"root"` // an empty directory to chroot into
	UID    int             `json:"uid"`
	GID    int             `json:"gid"`
}

type responderFile struct {
	Key  string `json:"key"` // dotlab.DownloadURLKey
	Path string `json:"path"`
}

type responderLeaf struct {
	Authority string `json:"authority"` // host:port, lower case
	CertDER   []byte `json:"cert"`
	KeyDER    []byte `json:"key"`
}

// handlesPerFile is how many whole-file GETs of one pinned file may use
// sendfile at once (pinnedFile.handles).
const handlesPerFile = 4

// maxResponderConfig bounds the configuration the responder reads.
const maxResponderConfig = 8 << 20

// runningResponder is a started responder process.
type runningResponder struct {
	cmd    *exec.Cmd
	netns  string // /proc/<pid>/ns/net: the namespace the container joins
	events []ResponderEvent
	done   chan struct{} // closed when its log is read to the end
	mu     sync.Mutex
	// stopOnce ends the process once (stop is called after the run and
	// again, deferred, on every path).
	stopOnce sync.Once
}

// startResponder generates the run's CA and one leaf certificate per https
// host, writes the CA certificate to bundle/ca/ca.pem, and starts the
// responder: binary re-executed with ResponderArg in a new network
// namespace (loopback only) and a new pid namespace, killed if this
// process dies. It returns once the responder listens and has dropped
// root.
func startResponder(binary, bundle string, downloads []Download, now time.Time, validFor time.Duration) (*runningResponder, error) {
	cfg := responderConfig{UID: ResponderUID, GID: ResponderGID, Root: filepath.Join(bundle, "responder-root")}
	hosts := map[string]bool{}
	for _, d := range downloads {
		key, err := dotlab.DownloadURLKey(d.URL)
		if err != nil {
			return nil, errorf("%s: %v", d.URL, err)
		}
		cfg.Files = append(cfg.Files, responderFile{Key: key, Path: d.File})
		if u, _ := url.Parse(key); u.Scheme == "https" {
			hosts[authority(u)] = true
		}
	}
	caPEM, leaves, err := runCA(dotlab.SortedKeys(hosts), now, validFor)
	if err != nil {
		return nil, err
	}
	cfg.Leaves = leaves
	for _, d := range []string{filepath.Join(bundle, "ca"), cfg.Root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{"ca.pem", "ca-certificates.crt"} {
		if err := os.WriteFile(filepath.Join(bundle, "ca", name), caPEM, 0o644); err != nil {
			return nil, err
		}
	}
	return spawnResponder(binary, cfg)
}

// authority is u's "host:port", the port always written.
func authority(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// spawnResponder starts the responder process with cfg on its stdin and
// waits for its "ready" line.
func spawnResponder(binary string, cfg responderConfig) (*runningResponder, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, ResponderArg)
	cmd.Env = []string{}
	cmd.Stdin = strings.NewReader(string(data))
	cmd.Stderr = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS,
		Pdeathsig:  syscall.SIGKILL,
		Setpgid:    true,
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, errorf("start %s: %w", binary, err)
	}
	rr := &runningResponder{cmd: cmd, netns: fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid), done: make(chan struct{})}
	lines := bufio.NewReaderSize(out, 8<<10)
	ready := make(chan error, 1)
	go func() {
		first, err := lines.ReadString('\n')
		if err != nil || strings.TrimSpace(first) != `{"ready":true}` {
			ready <- errorf("did not start: %q %v", strings.TrimSpace(first), err)
			close(rr.done)
			return
		}
		ready <- nil
		rr.read(lines)
	}()
	select {
	case err = <-ready:
	case <-time.After(10 * time.Second):
		err = errorf("did not start within 10 s")
	}
	if err != nil {
		rr.stop()
		return nil, err
	}
	return rr, nil
}

// read collects the responder's event lines (bounded: lines over 8 KiB and
// lines after responderMaxLogLines+1 are dropped) until its stdout closes.
func (rr *runningResponder) read(r *bufio.Reader) {
	defer close(rr.done)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			continue
		}
		if len(line) > 0 {
			var e ResponderEvent
			rr.mu.Lock()
			if json.Unmarshal(line, &e) == nil && len(rr.events) <= responderMaxLogLines {
				rr.events = append(rr.events, e)
			}
			rr.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// stop ends the responder (SIGTERM lets it write its last line; SIGKILL
// after a second), waits for it and returns what it logged.
func (rr *runningResponder) stop() []ResponderEvent {
	if rr == nil {
		return nil
	}
	rr.stopOnce.Do(rr.terminate)
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.events
}

func (rr *runningResponder) terminate() {
	rr.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan struct{})
	go func() {
		select {
		case <-exited:
		case <-time.After(time.Second):
			rr.cmd.Process.Kill()
		}
	}()
	select {
	case <-rr.done:
	case <-time.After(2 * time.Second):
		rr.cmd.Process.Kill()
	}
	rr.cmd.Wait()
	close(exited)
}

// runCA makes the run's certificate authority (ECDSA P-256, valid from a
// minute before now for validFor, name-constrained to the pinned hosts)
// and a leaf certificate for each https authority, signed by it. It returns
// the CA certificate (PEM) and the leaves; the CA's private key is
// discarded when it returns, so no certificate can be issued after.
func runCA(authorities []string, now time.Time, validFor time.Duration) ([]byte, []responderLeaf, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	notBefore, notAfter := now.Add(-time.Minute), now.Add(validFor)
	ca := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "DotLab sandbox download responder (one run)"},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign,
	}
	var names []string
	for _, a := range authorities {
		host, _, _ := net.SplitHostPort(a)
		if ip, err := netip.ParseAddr(host); err == nil {
			ca.PermittedIPRanges = append(ca.PermittedIPRanges, &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())})
		} else {
			names = append(names, host)
		}
	}
	ca.PermittedDNSDomains = names
	ca.PermittedDNSDomainsCritical = len(authorities) > 0
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		return nil, nil, err
	}
	var leaves []responderLeaf
	for _, a := range authorities {
		host, _, _ := net.SplitHostPort(a)
		leaf := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: host}, NotBefore: notBefore, NotAfter: notAfter,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			leaf.IPAddresses = []net.IP{ip.AsSlice()}
		} else {
			leaf.DNSNames = []string{host}
		}
		der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		leaves = append(leaves, responderLeaf{Authority: a, CertDER: der, KeyDER: keyDER})
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), leaves, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// RunResponderIfAsked runs this process as the download responder and
// exits when its first argument is ResponderArg; otherwise it returns at
// once. Call it first in main (cmd/dotlab) and in TestMain of test binaries
// that run sandboxes with downloads.
func RunResponderIfAsked() {
	if len(os.Args) < 2 || os.Args[1] != ResponderArg {
		return
	}
	if err := responderMain(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// responderMain is the responder process: read the configuration, bring
// up loopback, open the pinned files and listen on 127.0.0.1:ResponderPort
// (as root, in the new network namespace), then chroot into an empty
// directory, drop to cfg.UID/GID with no supplementary groups and no
// capabilities (no_new_privs), say ready and serve until SIGTERM or SIGKILL.
func responderMain(in io.Reader, out io.Writer) error {
	var cfg responderConfig
	data, err := io.ReadAll(io.LimitReader(in, maxResponderConfig+1))
	if err != nil || len(data) > maxResponderConfig {
		return errorf("configuration unreadable or over %d bytes", maxResponderConfig)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return errorf("configuration: %v", err)
	}
	s, err := loadResponder(cfg)
	if err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(ResponderPort))
	if err != nil {
		return errorf("listen: %v", err)
	}
	if err := dropRoot(cfg); err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	s.events = &eventLog{w: enc}
	io.WriteString(out, "{\"ready\":true}\n")
	ctx, stop := signalContext()
	defer stop()
	err = s.serve(ctx, ln)
	s.drain()
	s.events.close()
	return err
}

// loadResponder opens the pinned files and parses the leaf certificates.
func loadResponder(cfg responderConfig) (*responder, error) {
	s := &responder{files: map[string]pinnedFile{}, leaves: map[string]*tls.Certificate{}}
	for _, f := range cfg.Files {
		fh, err := os.OpenFile(f.Path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return nil, errorf("open %s: %v", f.Path, err)
		}
		fi, err := fh.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return nil, errorf("%s: not a regular file", f.Path)
		}
		pf := pinnedFile{body: fh, size: fi.Size(), handles: make(chan *os.File, handlesPerFile)}
		for i := 0; i < handlesPerFile; i++ {
			h, err := os.OpenFile(f.Path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
			if err != nil {
				return nil, errorf("open %s: %v", f.Path, err)
			}
			pf.handles <- h
		}
		s.files[f.Key] = pf
	}
	for _, l := range cfg.Leaves {
		key, err := x509.ParseECPrivateKey(l.KeyDER)
		if err != nil {
			return nil, errorf("leaf key: %v", err)
		}
		s.leaves[l.Authority] = &tls.Certificate{Certificate: [][]byte{l.CertDER}, PrivateKey: key}
	}
	return s, nil
}

// loopbackUp sets the loopback interface of this network namespace up.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return errorf("socket: %v", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return errorf("lo: %v", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return errorf("lo flags: %v", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return errorf("lo up: %v", err)
	}
	return nil
}

// dropRoot chroots into cfg.Root and becomes cfg.UID:cfg.GID with no
// supplementary groups; setuid from root to another uid clears every
// capability set, and no_new_privs keeps it so.
func dropRoot(cfg responderConfig) error {
	if cfg.UID == 0 || cfg.GID == 0 {
		return errorf("refusing to serve as root")
	}
	if err := unix.Chroot(cfg.Root); err != nil {
		return errorf("chroot: %v", err)
	}
	if err := os.Chdir("/"); err != nil {
		return errorf("chdir: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return errorf("no_new_privs: %v", err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return errorf("setgroups: %v", err)
	}
	if err := syscall.Setgid(cfg.GID); err != nil {
		return errorf("setgid: %v", err)
	}
	if err := syscall.Setuid(cfg.UID); err != nil {
		return errorf("setuid: %v", err)
	}
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		return errorf("capget: %v", err)
	}
	if os.Getuid() == 0 || caps[0].Effective|caps[0].Permitted|caps[1].Effective|caps[1].Permitted != 0 {
		return errorf("still privileged after dropping root")
	}
	return nil
}

// signalContext ends on SIGTERM.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// responder starts the download responder of a run with downloads (nil,
// and nothing started, without), its certificates valid for the run's
// timeout and an hour.
func (r Runtime) responder(bundle string, spec Spec) (*runningResponder, error) {
	if len(spec.Downloads) == 0 {
		return nil, nil
	}
	bin := r.ResponderBinary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, errorf("own binary: %v", err)
		}
		bin = exe
	}
	valid := time.Duration(spec.Limits.WithDefaults().TimeoutSeconds)*time.Second + time.Hour
	return startResponder(bin, bundle, spec.Downloads, r.now(), valid)
}

// configure puts the container in the responder's network namespace and
// binds the run's CA read-only at /run/dotlab and, when the image has the
// directory, over /etc/ssl/certs (Debian's ca-certificates: the compiled-in
// CA file of libcurl, which R's curl package reads whatever CURL_CA_BUNDLE
// says, and OpenSSL's default). The directory then holds only the run's CA
// as ca-certificates.crt: no other certificate is of use where nothing
// else is reachable. Nothing happens without a responder.
func (rr *runningResponder) configure(cfg *specs.Spec, bundle string) {
	if rr == nil {
		return
	}
	for i, ns := range cfg.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			cfg.Linux.Namespaces[i].Path = rr.netns
		}
	}
	ro := []string{"rbind", "nosuid", "nodev", "noexec", "ro"}
	cfg.Mounts = append(cfg.Mounts, specs.Mount{Destination: caMountDir, Type: "bind", Source: filepath.Join(bundle, "ca"), Options: ro})
	if fi, err := os.Lstat(filepath.Join(cfg.Root.Path, systemCADir)); err == nil && fi.IsDir() {
		cfg.Mounts = append(cfg.Mounts, specs.Mount{Destination: systemCADir, Type: "bind", Source: filepath.Join(bundle, "ca"), Options: ro})
	}
}

// systemCADir is Debian's certificate directory (package ca-certificates).
const systemCADir = "/etc/ssl/certs"
