package runner

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestProbeDownload2(t *testing.T) {
	u := os.Getenv("PROBE_URL")
	if u == "" {
		t.Skip()
	}
	c := LocalPolicy().Client()
	data, _ := os.ReadFile("/tmp/srv/blob")
	for round := 0; round < 3; round++ {
		start := time.Now()
		sha256.Sum256(data)
		t.Logf("raw sha: %v", time.Since(start))
		resp, _ := c.Get(u)
		start = time.Now()
		hashCopy(context.Background(), io.Discard, resp.Body, nil)
		resp.Body.Close()
		t.Logf("read+hash: %v", time.Since(start))
		resp, _ = c.Get(u)
		f, _ := os.Create(filepath.Join(t.TempDir(), "y"))
		start = time.Now()
		hashCopy(context.Background(), f, resp.Body, nil)
		f.Close()
		resp.Body.Close()
		t.Logf("read+write+hash: %v", time.Since(start))
	}
}
