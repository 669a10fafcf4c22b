package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/imagestore"
)

// TestUnpullableHintPerCause: the warning's fix follows why a registry did
// not serve the image: plain http without --allow-private-urls, a 401 (the
// repository is not public-read), a 404 (the image was never pushed), each
// from a real imagestore.Pullable against a loopback registry.
func TestUnpullableHintPerCause(t *testing.T) {
	status := http.StatusNotFound
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="lab"`)
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/lab/x@sha256:" + strings.Repeat("a", 64)
	ctx := context.Background()
	cases := []struct {
		status    int
		allowHTTP bool
		want      string
	}{
		{http.StatusNotFound, false, "--allow-private-urls"},
		{http.StatusUnauthorized, true, "runners pull anonymously: make the repository public-read"},
		{http.StatusNotFound, true, "only in this machine's store: push it with dotlab image push"},
	}
	for _, c := range cases {
		status = c.status
		err := imagestore.Pullable(ctx, ref, imagestore.PullOptions{AllowHTTP: c.allowHTTP})
		if err == nil {
			t.Fatalf("status %d: pullable", c.status)
		}
		if got := UnpullableHint(err); !strings.Contains(got, c.want) {
			t.Errorf("status %d allowHTTP %v: %v: hint %q, want %q", c.status, c.allowHTTP, err, got, c.want)
		}
	}
}
