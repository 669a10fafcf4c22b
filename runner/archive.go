package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// InputArchive is the server's content-addressed input archive as a
// runner sees it (docs/protocol.md "Input archive"; client.InputArchive
// implements it over GET, HEAD and PUT /claims/{id}/inputs/{sha256}). Its
// bytes are never trusted: each is verified against the pin like a
// download.
type InputArchive interface {
	// Open reads the archived bytes of sha256 and their announced size
	// (-1: unknown).
	Open(ctx context.Context, sha256 string) (io.ReadCloser, int64, error)
	// Has reports whether the archive holds sha256.
	Has(ctx context.Context, sha256 string) (bool, error)
	// Put uploads size bytes of body as sha256.
	Put(ctx context.Context, sha256 string, body io.Reader, size int64) error
}

type archiveKey struct{}

// WithInputArchive makes the reruns run under ctx fall back to a (only
// when an input's host cannot be fetched) and upload to it the inputs
// they verified that it lacks. The archive belongs to one claim, so it
// travels with the run's context rather than the Runner.
func WithInputArchive(ctx context.Context, a InputArchive) context.Context {
	return context.WithValue(ctx, archiveKey{}, a)
}

func archiveFrom(ctx context.Context) InputArchive {
	a, _ := ctx.Value(archiveKey{}).(InputArchive)
	return a
}

// Bounds of the upload after a run: at most maxUploads inputs, all within
// uploadTimeout.
const (
	maxUploads    = 64
	uploadTimeout = 10 * time.Minute
)

// inputTrail is what the fetcher saw of the pinned inputs: the ones
// verified from their own hosts (candidates for the archive) and the ones
// that came from the archive instead.
type inputTrail struct {
	verified []verifiedInput
	archived []archivedInput
}

type verifiedInput struct {
	what, sha256, path string
	bytes              int64
}

type archivedInput struct {
	what, url, sha256, origin string
	bytes                     int64
}

// hostGone reports whether a fetch failed because the input's host no
// longer serves it (docs/sandbox.md "Input archive"): the connection
// refused, the name not resolving, 404 or 410, or a 5xx after the
// retries. A policy refusal, a stall, a size limit, a cut body or the
// budget are not: those never fall back.
func hostGone(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code == 404 || se.Code == 410 || se.Code >= 500
	}
	if errors.Is(err, ErrRefused) || errors.Is(err, ErrStalled) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrFetchBudget) {
		return false
	}
	var dns *net.DNSError
	var op *net.OpError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.As(err, &op) && op.Op == "dial"
}

// ErrArchiveRefused marks an archived copy whose bytes do not hash to the
// pin: it is refused like any download that differs, and the original
// fetch failure stands.
var ErrArchiveRefused = errors.New("the input archive's copy was refused")

// fromArchive gets what from the archive after its host failed with
// origin: the archived bytes are received and hashed exactly like a
// download and kept only when they hash to want. Any failure, a hash
// mismatch included, returns origin (wrapped with why the archive did
// not help), never input_mismatch: the host's bytes were not seen.
func (f *fetcher) fromArchive(ctx context.Context, what, rawURL, want string, origin error) (Fetched, error) {
	body, total, err := f.archive.Open(ctx, want)
	if err != nil {
		return Fetched{}, fmt.Errorf("%w (the input archive could not help: %v)", origin, err)
	}
	defer body.Close()
	got, err := f.receive(ctx, what+" (input archive)", body, total, want)
	switch {
	case err != nil:
		return Fetched{}, fmt.Errorf("%w (the input archive could not help: %v)", origin, err)
	case got.SHA256 != want:
		return Fetched{}, fmt.Errorf("%w (%w: its bytes hash to sha256 %s, not the pinned %s)", origin, ErrArchiveRefused, got.SHA256, want)
	}
	got.FromArchive = true
	f.trail.archived = append(f.trail.archived, archivedInput{what: what, url: redactURL(rawURL), sha256: want, origin: errText(origin), bytes: got.Bytes})
	return got, nil
}

// reportArchived logs and notes each input that came from the archive,
// so the run's record says so.
func reportArchived(log *Log, t *inputTrail, fs *facts) {
	for _, a := range t.archived {
		log.Warn("archive", a.what+" came from the server's input archive: its URL could not be fetched", map[string]any{
			"input": a.what, "url": a.url, "sha256": a.sha256, "bytes": a.bytes, "from_archive": true, "origin_error": a.origin})
		fs.notes = joinNotes(fs.notes, fmt.Sprintf("%s was read from the server's input archive (sha256 %s, verified against the pin): %s could not be fetched", a.what, a.sha256, a.url))
	}
}

// uploadVerified puts each input verified from its own host that the
// archive lacks, at most maxUploads within uploadTimeout, logging each
// attempt. It never fails the run: an upload that fails is a warning.
func uploadVerified(ctx context.Context, log *Log, a InputArchive, t *inputTrail) {
	ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	seen := map[string]bool{}
	for i, v := range t.verified {
		if seen[v.sha256] {
			continue
		}
		seen[v.sha256] = true
		if i >= maxUploads {
			log.Warn("archive", fmt.Sprintf("%d more verified inputs were not offered to the archive", len(t.verified)-i), nil)
			return
		}
		err := uploadOne(ctx, a, v)
		data := map[string]any{"input": v.what, "sha256": v.sha256, "bytes": v.bytes}
		switch {
		case errors.Is(err, errHeld):
		case err != nil:
			data["error"] = errText(err)
			log.Warn("archive", "could not upload "+v.what+" to the input archive", data)
		default:
			log.Info("archive", "uploaded "+v.what+" to the input archive", data)
		}
	}
}

var errHeld = errors.New("held already")

func uploadOne(ctx context.Context, a InputArchive, v verifiedInput) error {
	if held, err := a.Has(ctx, v.sha256); err != nil || held {
		if held {
			return errHeld
		}
		return err
	}
	in, err := os.Open(v.path)
	if err != nil {
		return err
	}
	defer in.Close()
	return a.Put(ctx, v.sha256, in, v.bytes)
}
