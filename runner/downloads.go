package runner

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/sandbox"
)

// downloads fetches and verifies every pinned download of m (spec v0.2
// "downloads", docs/manifest-spec.md) exactly as inputs fetches datasets:
// the same fetch policy, budget and cache, the hash of each recorded in
// input_hashes as "download:<name>". It returns what the sandbox's
// responder serves (the verified cache files by URL) and one line per hash
// mismatch, which makes the run input_mismatch like a dataset's.
func (r *Runner) downloads(ctx context.Context, log *Log, f *fetcher, m *dotlab.Manifest, fs *facts) ([]sandbox.Download, []string, error) {
	var served []sandbox.Download
	var mismatches []string
	for i, d := range m.Downloads {
		what := fmt.Sprintf("downloads[%d] (%s)", i, d.Name)
		start := r.Clock.Now()
		got, err := f.fetch(ctx, what, d.URL, d.SHA256)
		if err != nil {
			if unfetchable(err) {
				log.Error("inputs", "download "+d.Name+" cannot be fetched", map[string]any{"download": d.Name, "url": redactURL(d.URL), "error": errText(err)})
				return nil, nil, issuef("download %s cannot be fetched as written: %v%s", d.Name, err, trustHint(err))
			}
			return nil, nil, err
		}
		fs.inputs[dotlab.DownloadInputKey(d.Name)] = got.SHA256
		// "name" is the input_hashes key, as log coverage reads it
		// (docs/protocol.md "Log coverage").
		data := map[string]any{"name": dotlab.DownloadInputKey(d.Name), "download": d.Name, "url": redactURL(d.URL), "expected": d.SHA256, "actual": got.SHA256,
			"bytes": got.Bytes, "cache_hit": got.CacheHit, "seconds": r.since(start)}
		if got.SHA256 != d.SHA256 {
			log.Error("inputs", "hash mismatch for download "+d.Name, data)
			mismatches = append(mismatches, fmt.Sprintf("download %s: expected sha256 %s, got %s", d.Name, d.SHA256, got.SHA256))
			continue
		}
		log.Info("inputs", "download "+d.Name+" hash verified", data)
		served = append(served, sandbox.Download{URL: d.URL, File: got.Path})
	}
	return served, mismatches, nil
}

// trustHint is what to do about a download whose server's certificate is
// not trusted: a lab's own CA is trusted only when named.
func trustHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	if errors.As(err, &unknown) || errors.As(err, &verify) {
		return " (a server with a certificate from a private CA: set " + TrustCAEnv + "=FILE, the CA's PEM file, where the rerun runs)"
	}
	return ""
}

// logResponder copies the responder's record of the run's requests into
// the run's log: a served request at info, a refused one as a warning that
// names the method and URL and says how to pin it.
func logResponder(log *Log, events []sandbox.ResponderEvent) {
	for _, e := range events {
		data := map[string]any{"method": e.Method, "url": redactURL(e.URL), "status": e.Status}
		switch {
		case e.Dropped > 0:
			log.Warn("downloads", fmt.Sprintf("%d more requests were not logged", e.Dropped), map[string]any{"dropped": e.Dropped})
		case e.Refused == "":
			data["bytes"] = e.Bytes
			log.Info("downloads", "served "+e.Method+" "+redactURL(e.URL)+" from its pinned download", data)
		default:
			data["refused"] = e.Refused
			log.Warn("downloads", "refused "+e.Method+" "+redactURL(e.URL)+" ("+e.Refused+"): "+refusalHint(e), data)
		}
	}
}

// refusalHint says what the author can do about a refused request. A
// refused CONNECT names only the host: the responder's CA signs only hosts
// with a pinned https URL (docs/sandbox.md "Pinned downloads"), so it never
// sees which URL the code asked for there.
func refusalHint(e sandbox.ResponderEvent) string {
	switch {
	case e.Refused == "method":
		return "the sandbox has no network; only GET and HEAD of pinned downloads are answered"
	case e.Refused == "host":
		return "no URL on " + connectHost(e.URL) + " is pinned, so the tunnel is refused before the code names a URL; pin each URL the code fetches there in the manifest's downloads (dotlab manifest init --download URL), or find it in the code"
	case strings.HasPrefix(e.URL, "http://") || strings.HasPrefix(e.URL, "https://"):
		return "the sandbox has no network; to let the code fetch it, pin it in the manifest's downloads (dotlab manifest init --download URL)"
	}
	return "the sandbox has no network"
}

// connectHost is the "host:port" of a refused CONNECT, which the responder
// records as "https://host:port/".
func connectHost(shown string) string {
	return strings.TrimSuffix(strings.TrimPrefix(shown, "https://"), "/")
}

// refusedRequests lists the requests the responder refused, one line each,
// for the rerun's summary (Record.Refused): "GET URL (not pinned)" with the
// whole URL, query included, as the code asked for it (only userinfo is
// redacted), or "CONNECT host:port (no URL on this host is pinned)".
func refusedRequests(events []sandbox.ResponderEvent) []string {
	var lines []string
	for _, e := range events {
		switch {
		case e.Refused == "" || e.Dropped > 0:
		case e.Refused == "host":
			lines = append(lines, e.Method+" "+connectHost(e.URL)+" (no URL on this host is pinned)")
		default:
			lines = append(lines, e.Method+" "+redactURL(e.URL)+" ("+e.Refused+")")
		}
	}
	return lines
}
