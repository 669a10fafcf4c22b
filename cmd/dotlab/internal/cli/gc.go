package cli

import (
	"runtime"
	"runtime/debug"
)

// DeferFirstGC holds the garbage collector off until the heap first nears
// limit bytes, then hands back the settings it found (GOGC, GOMEMLIMIT).
// A trivial rerun allocates far less than that in all, so it never
// collects: the collections of its start-up (compiling the manifest
// schema, starting the sandbox) were about 7% of its CPU
// (bench/README.md, "A trivial rerun's fixed cost"). A rerun that
// allocates more (an image unpacked) collects once at the limit and then
// as before. The hand-back is a finalizer on an object only that first
// collection can free.
func DeferFirstGC(limit int64) {
	gcPercent := debug.SetGCPercent(-1)
	memLimit := debug.SetMemoryLimit(limit)
	sentinel := new([64]byte)
	runtime.SetFinalizer(sentinel, func(*[64]byte) {
		debug.SetGCPercent(gcPercent)
		debug.SetMemoryLimit(memLimit)
	})
}
