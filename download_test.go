package dotlab

import (
	"net/url"
	"strings"
	"testing"
)

// TestEvaluateRunDownloads: a compared run shows every pinned download's
// hash under "download:<name>", equal to the manifest's; an input_mismatch
// run may stand on a download alone.
func TestEvaluateRunDownloads(t *testing.T) {
	const h = "ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445"
	commit := strings.Repeat("ab", 20)
	m := &Manifest{
		SpecVersion: SpecVersionRuntime,
		Downloads:   []Download{{Name: "helpers", URL: "https://example.org/helpers.R", SHA256: h}},
		Code:        Code{Repository: "https://example.org/r.git", Commit: commit},
		Targets:     []Target{{Name: "x", Value: "1", Tolerance: Tolerance{Type: "absolute", Value: "0"}}},
	}
	body := func() *RunBody {
		return &RunBody{InputHashes: map[string]string{"download:helpers": h}, Outcome: OutcomeReproduced,
			Environment: RunEnvironment{CodeCommit: commit}, Comparisons: []RunComparison{{Name: "x", Rerun: "1"}}}
	}
	if _, err := EvaluateRun(m, body()); err != nil {
		t.Fatal(err)
	}
	for want, mutate := range map[string]func(*RunBody){
		`missing download "helpers"`:         func(b *RunBody) { delete(b.InputHashes, "download:helpers") },
		`$.input_hashes["download:helpers"]`: func(b *RunBody) { b.InputHashes["download:helpers"] = strings.Repeat("0", 64) },
		`$.input_hashes["download:other"]`:   func(b *RunBody) { b.InputHashes["download:other"] = h },
	} {
		b := body()
		mutate(b)
		_, err := EvaluateRun(m, b)
		if err == nil || !strings.Contains(strings.Join(ErrorDetail(err), "\n"), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	b := body()
	b.Outcome, b.Notes, b.Comparisons = OutcomeInputMismatch, "download helpers: expected …", nil
	if _, err := EvaluateRun(m, b); err == nil {
		t.Error("input_mismatch with every hash as pinned was accepted")
	}
	b.InputHashes["download:helpers"] = strings.Repeat("0", 64)
	if _, err := EvaluateRun(m, b); err != nil {
		t.Fatalf("input_mismatch on a download: %v", err)
	}
}

// TestDownloadURLKey: the responder's comparison form of a URL.
func TestDownloadURLKey(t *testing.T) {
	for in, want := range map[string]string{
		"https://Example.ORG/a/b.csv":       "https://example.org/a/b.csv",
		"https://example.org:443/a%20b.csv": "https://example.org/a%20b.csv",
		"http://example.org:80":             "http://example.org/",
		"http://example.org:8080/x?b=2&a=1": "http://example.org:8080/x?b=2&a=1",
		"https://[::1]:443/x":               "https://[::1]/x",
		"https://127.0.0.1:8443/x.bin?v=1":  "https://127.0.0.1:8443/x.bin?v=1",
	} {
		if got, err := DownloadURLKey(in); err != nil || got != want {
			t.Errorf("DownloadURLKey(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ftp://example.org/x", "https://u:p@example.org/x", "https://example.org/x#y", "https:///x", "/x"} {
		if got, err := DownloadURLKey(bad); err == nil {
			t.Errorf("DownloadURLKey(%s) = %q, want an error", bad, got)
		}
	}
}

// TestDownloadURLKeyKeepsReservedEncodings: URLs are compared on their
// escaped path normalised per RFC 3986 §6.2.2 only: an encoded reserved
// character ("%3F", "%2F") is not the character, the hex case and an
// encoded unreserved character do not matter; pin and request agree.
func TestDownloadURLKeyKeepsReservedEncodings(t *testing.T) {
	key := func(raw string) string {
		k, err := DownloadURLKey(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return k
	}
	for _, pair := range [][2]string{{"http://h.example/a%3Fb", "http://h.example/a?b"}, {"http://h.example/a%2Fb", "http://h.example/a/b"},
		{"http://h.example/%2e%2e%2Fx", "http://h.example/../x"}, {"http://h.example/a%20b", "http://h.example/a+b"}, {"http://h.example/a%26b", "http://h.example/a&b"}} {
		if key(pair[0]) == key(pair[1]) {
			t.Errorf("%s and %s are one key %s", pair[0], pair[1], key(pair[0]))
		}
	}
	for _, pair := range [][2]string{{"http://h.example/a%3fb", "http://h.example/a%3Fb"}, {"http://h.example/%74.csv", "http://h.example/t.csv"},
		{"http://h.example/%7E%5f%2D", "http://h.example/~_-"}, {"http://h.example/a b", "http://h.example/a%20b"}} {
		if key(pair[0]) != key(pair[1]) {
			t.Errorf("%s (%s) and %s (%s) are different keys", pair[0], key(pair[0]), pair[1], key(pair[1]))
		}
	}
	// The responder keys a request on its escaped path and raw query: GET
	// http://h.example/a?b is path /a, query b, not the pinned /a%3Fb.
	pinned := key("http://h.example/a%3Fb")
	for target, same := range map[string]bool{"http://h.example/a?b": false, "http://h.example/a%3fb": true, "http://h.example/a%3Fb": true} {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			t.Fatal(err)
		}
		got, err := RequestURLKey(u.Scheme, u.Host, u.EscapedPath(), u.RawQuery)
		if err != nil || (got == pinned) != same {
			t.Errorf("request %s: key %s, pinned %s, want same=%v (%v)", target, got, pinned, same, err)
		}
	}
}
