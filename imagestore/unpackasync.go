package imagestore

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/dotlab/dotlab/internal/safefs"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// Creating a file is the dearest system call of an unpack (the kernel's
// inode allocation: about 0.3 ms of CPU a file on the ext4 caches measured
// in bench/README.md "First unpack"), and one goroutine makes them one at a
// time. fileWriters creates small regular files on other goroutines: the
// unpacker reads a file's contents into a buffer (every limit and the ratio
// rule are applied there, as for any entry) and hands the buffer, the
// parent's descriptor and the entry's metadata to a writer.
//
// Order is kept where it can be seen. Names handed out and not yet known to
// be written are pending; before anything that could observe or disturb a
// pending file (any entry at a pending name, any removal, a hard link, an
// entry applied through os.Root, a directory entry restating an existing
// directory, closing directory descriptors, the end of a layer) the unpacker
// waits for every writer (barrier). Only new names in existing directories
// are written concurrently, which no later entry can tell from the
// sequential order.

// asyncFileMax is the largest file handed to a writer; larger files are
// written by the unpacker itself. asyncBuffers bounds the memory held
// (asyncBuffers × asyncFileMax).
const (
	asyncFileMax = 256 << 10
	asyncBuffers = 16
)

// fileJob is one file for a writer: base in the directory parent, name for
// errors, the entry's owner, mode and time, and its contents.
type fileJob struct {
	parent     *os.File
	base, name string
	uid, gid   int
	perm       os.FileMode
	mtime      time.Time
	data, buf  []byte
}

// asyncFailure is the first failed job: the entry's tar name and the error.
type asyncFailure struct {
	name string
	err  error
}

// fileWriters is the pool of writer goroutines of one unpack.
type fileWriters struct {
	jobs     chan fileJob
	free     chan []byte
	pending  map[string]bool // used by the unpacker goroutine only
	inFlight sync.WaitGroup
	done     sync.WaitGroup
	mu       sync.Mutex
	failure  *asyncFailure
}

func startFileWriters() *fileWriters {
	w := &fileWriters{jobs: make(chan fileJob, asyncBuffers), free: make(chan []byte, asyncBuffers), pending: map[string]bool{}}
	for i := 0; i < asyncBuffers; i++ {
		w.free <- make([]byte, asyncFileMax)
	}
	n := max(runtime.GOMAXPROCS(0), 2)
	for i := 0; i < n; i++ {
		w.done.Add(1)
		go w.loop()
	}
	return w
}

func (w *fileWriters) loop() {
	defer w.done.Done()
	sparse := make([]byte, 32*sparseBlock)
	for j := range w.jobs {
		if err := j.write(sparse); err != nil {
			w.mu.Lock()
			if w.failure == nil {
				w.failure = &asyncFailure{name: j.name, err: err}
			}
			w.mu.Unlock()
		}
		w.free <- j.buf
		w.inFlight.Done()
	}
}

// write creates the file as unpacker.fileAt does.
func (j fileJob) write(sparse []byte) error {
	pfd := int(j.parent.Fd())
	fd, err := unix.Openat(pfd, j.base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fsError("write the file", pathErr("openat", j.name, err))
	}
	f := os.NewFile(uintptr(fd), j.name)
	defer f.Close()
	if err := writeSparse(f, bytes.NewReader(j.data), sparse); err != nil {
		return fsError("write the file", err)
	}
	if err := f.Chown(j.uid, j.gid); err != nil {
		return fsError("set the owner", err)
	}
	if err := f.Chmod(j.perm); err != nil {
		return fsError("set the mode", err)
	}
	ts := []unix.Timespec{unix.NsecToTimespec(j.mtime.UnixNano()), unix.NsecToTimespec(j.mtime.UnixNano())}
	if err := unix.UtimesNanoAt(pfd, j.base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fsError("set the times", pathErr("utimensat", j.name, err))
	}
	return fsError("write the file", f.Close())
}

// barrier waits until every file handed out is written (or failed).
func (w *fileWriters) barrier() {
	if w == nil || len(w.pending) == 0 {
		return
	}
	w.inFlight.Wait()
	clear(w.pending)
}

// failed is the first failure of a writer, nil when none.
func (w *fileWriters) failed() *asyncFailure {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failure
}

// stop waits for the writers to finish and ends them.
func (w *fileWriters) stop() {
	if w == nil {
		return
	}
	close(w.jobs)
	w.done.Wait()
}

// fileAsync hands the regular file entry hdr (at most asyncFileMax bytes)
// to a writer, after reading its contents through fileReader; ok is false
// when the file must be written by the caller instead.
func (u *unpacker) fileAsync(tr io.Reader, hdr *tar.Header, parent *os.File, base, name string) (ok bool, err error) {
	if u.writers == nil || hdr.Size > asyncFileMax {
		return false, nil
	}
	buf := <-u.writers.free
	// archive/tar hands out exactly hdr.Size bytes (holes as zeros), which fit.
	m, rerr := safefs.Fill(fileReader{r: tr, u: u}, buf)
	if rerr != nil && rerr != io.EOF {
		u.writers.free <- buf
		return true, fsError("write the file", rerr)
	}
	u.writers.pending[name] = true
	u.writers.inFlight.Add(1)
	u.writers.jobs <- fileJob{parent: parent, base: base, name: hdr.Name, uid: hdr.Uid, gid: hdr.Gid,
		perm: entryPerm(hdr), mtime: hdr.ModTime, data: buf[:m], buf: buf}
	return true, nil
}

// entryError names the layer and the entry of a failure; a rule's
// refusal refuses the image (ErrUnsafeImage).
func entryError(desc v1.Descriptor, name string, err error) error {
	var rule ruleError
	if errors.As(err, &rule) {
		return fmt.Errorf("%w: layer %s, entry %s: %v", ErrUnsafeImage, desc.Digest, quoteName(name), err)
	}
	return fmt.Errorf("layer %s, entry %s: %w", desc.Digest, quoteName(name), err)
}
