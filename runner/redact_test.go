package runner

import (
	"strings"
	"testing"
)

func TestScrubURLs(t *testing.T) {
	in := `Get "http://127.0.0.1:1/blob?X-Amz-Signature=abc&X-Amz-Credential=AKIA1234": dial tcp: refused; also https://u:p@h.example/x#frag and https://plain.example/path`
	got := scrubURLs(in)
	for _, leak := range []string{"X-Amz-Signature", "AKIA1234", "u:p@", "#frag"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q survived: %s", leak, got)
		}
	}
	for _, keep := range []string{"http://127.0.0.1:1/blob?…", "https://h.example/x?…", "https://plain.example/path", "dial tcp: refused"} {
		if !strings.Contains(got, keep) {
			t.Errorf("%q lost: %s", keep, got)
		}
	}
}
