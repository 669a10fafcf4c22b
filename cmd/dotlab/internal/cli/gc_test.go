package cli

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestDeferFirstGC: the collector is off until the heap nears the limit;
// the first collection hands back the settings that were there before.
func TestDeferFirstGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(1 << 40)
	DeferFirstGC(64 << 20)
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("GOGC during the deferral: %d, want -1 (off)", p)
	}
	if l := debug.SetMemoryLimit(-1); l != 64<<20 {
		t.Fatalf("memory limit during the deferral: %d, want %d", l, 64<<20)
	}
	// Past the limit the runtime collects by itself: allocate 4x the limit
	// in garbage and wait for the finalizer to hand the settings back (the
	// memory limit is the last it restores).
	var keep []byte
	deadline := time.Now().Add(20 * time.Second)
	for {
		for i := 0; i < 256; i++ {
			keep = make([]byte, 1<<20)
		}
		_ = keep
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
		if l := debug.SetMemoryLimit(-1); l == 1<<40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the settings were not handed back after the heap passed the limit")
		}
	}
	if p := debug.SetGCPercent(150); p != 150 {
		t.Fatalf("GOGC after the first collection: %d, want 150 (as before)", p)
	}
}
