package dotlab_test

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
)

// TestOutputListingCountRefusedFirst (adversarial review): a listing of
// more than MaxOutputListingEntries lines is refused for its count, a
// cheap check (one pass counting newlines), before any line is parsed:
// 32 MiB of short lines used to be refused only after 100,100 lines were
// JSON-decoded and checked (about 380 ms of CPU per request, any agent
// that may challenge can send it).
func TestOutputListingCountRefusedFirst(t *testing.T) {
	var b bytes.Buffer
	for i := 0; b.Len() < dotlab.MaxOutputListingBytes-200; i++ {
		fmt.Fprintf(&b, `{"name":"o/%07d","sha256":"%064x"}`+"\n", i, i)
	}
	data := b.Bytes()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	least := time.Hour
	for k := 0; k < 5; k++ {
		t0 := cpu()
		_, err := dotlab.ParseOutputListing(data)
		if d := cpu() - t0; d < least {
			least = d
		}
		if dotlab.ErrorCode(err) != dotlab.ETOOLARGE {
			t.Fatalf("%d lines: %v, want too_large", bytes.Count(data, []byte("\n")), err)
		}
	}
	t.Logf("%d lines (%d bytes) refused in %v CPU (least of five)", bytes.Count(data, []byte("\n")), len(data), least)
	if least > 20*time.Millisecond {
		t.Errorf("a listing over the entry bound was refused after %v of CPU: count its lines before parsing them", least)
	}
}
