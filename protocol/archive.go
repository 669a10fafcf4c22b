package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/inputarchive"
)

// InputArchive is the content-addressed store of verified inputs
// (inputarchive.Archive implements it).
type InputArchive interface {
	Size(ctx context.Context, sha256 string) (int64, bool, error)
	Open(ctx context.Context, sha256 string) (io.ReadCloser, int64, error)
	Put(ctx context.Context, sha256 string, body io.Reader, max int64) (int64, error)
}

// ArchiveLimits bound the input archive: MaxBlob bytes per blob, PerClaim
// bytes summed over one claim's pinned inputs (`dotlab serve
// --archive-max-blob`, `--archive-per-claim`).
type ArchiveLimits struct{ MaxBlob, PerClaim int64 }

// DefaultArchiveLimits are 1 GiB per blob and 4 GiB per claim.
func DefaultArchiveLimits() ArchiveLimits { return ArchiveLimits{MaxBlob: 1 << 30, PerClaim: 4 << 30} }

// archiveRole reports whether role may put into and read from a claim's
// inputs: the agents that rerun it (and, in archiveTarget, an agent that
// may challenge the run now).
func archiveRole(role string) bool {
	return role == dotlab.RoleRunner || role == dotlab.RoleChallenger || role == dotlab.RoleReviewer
}

// archiveTarget makes the cheap checks of an archive request: an archive
// configured, a listed claim, agentID holding a rerunning role on it (or
// holding none and free to challenge its run now), and
// sum one of its manifest's pinned input hashes.
func (s *Service) archiveTarget(ctx context.Context, agentID, claimID, sum string) (*dotlab.Claim, error) {
	if s.archive == nil {
		return nil, dotlab.Errorf(dotlab.ENOTFOUND, "this server keeps no input archive (dotlab serve --archive-dir DIR)")
	}
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return nil, err
	}
	role, err := s.Store.RoleOf(ctx, claimID, agentID)
	if err != nil {
		return nil, err
	}
	// An agent that may challenge the run now reruns it before it holds
	// the challenger role (as for output listings, listingRole).
	if !archiveRole(role) && (role != "" || s.challengeable(ctx, c, agentID, dotlab.EventChallengeAgree, s.now()) != nil) {
		return nil, dotlab.Errorf(dotlab.EROLECONFLICT, "inputs of %s: only an agent holding the runner, challenger or reviewer role on the claim, or one that may challenge its run now, may put or read its archived inputs", claimID)
	}
	if !inputarchive.ValidSHA256(sum) || !c.Manifest.Pins(sum) {
		return nil, dotlab.Errorf(dotlab.ENOTFOUND, "sha256: %q is not the hash of an input the manifest of %s pins (datasets, helpers, downloads, code.archive)", sum, claimID)
	}
	return c, nil
}

// PutInput is the archive upload (PUT /claims/{id}/inputs/{sha256};
// docs/protocol.md "Input archive"): body, of announced length size (-1:
// unknown), is kept under sum when it hashes to sum. Cheap checks first
// (archiveTarget; then size against the blob limit and the claim's quota,
// counted over the other pinned inputs the archive holds), then the
// streamed hash. A blob held already is answered without reading body.
//
// Errors: ENOTFOUND (no archive, unknown claim, sum not pinned);
// EROLECONFLICT (no rerunning role); ETOOLARGE (over the blob limit or the
// claim's quota); EINVALID (the bytes hash to something else, or the body
// ended short or too slowly: nothing kept).
func (s *Service) PutInput(ctx context.Context, agentID, claimID, sum string, size int64, body io.Reader) (*dotlab.ArchivedInput, error) {
	held, c, err := s.putTarget(ctx, agentID, claimID, sum, size)
	if err != nil || held != nil {
		return held, err
	}
	room, release, err := s.reserveRoom(ctx, c, sum, size)
	if err != nil {
		return nil, err
	}
	defer release()
	br := &bodyReader{r: body}
	n, err := s.archive.Put(ctx, sum, br, room)
	switch {
	case err != nil && br.err != nil:
		// The client's fault (a body cut short of its Content-Length, or too
		// slow for the read deadline), not the server's.
		return nil, dotlab.Errorf(dotlab.EINVALID, "body: the upload ended after %d bytes of %d announced, or was too slow (about a second a MiB, plus a minute); nothing was kept: send it again", n, size)
	case errors.Is(err, inputarchive.ErrTooLarge):
		return nil, archiveTooLarge(claimID, n, s.archiveLimits, room)
	case errors.Is(err, inputarchive.ErrMismatch):
		return nil, dotlab.Errorf(dotlab.EINVALID, "body: these %d bytes do not hash to sha256 %s; nothing was kept: upload exactly the verified input", n, sum)
	case err != nil:
		return nil, fmt.Errorf("input archive: %w", err)
	}
	return &dotlab.ArchivedInput{SHA256: sum, Bytes: n, Stored: true}, nil
}

// bodyReader remembers the error of reading an upload's body (io.EOF
// aside), to tell the client's failures from the archive's.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// CheckPutInput makes PutInput's checks without the body, so that the
// HTTP edge can refuse an upload (or give it the time a large body needs)
// before reading a byte: nil when the blob may be put or is held already.
func (s *Service) CheckPutInput(ctx context.Context, agentID, claimID, sum string, size int64) error {
	_, _, err := s.putTarget(ctx, agentID, claimID, sum, size)
	return err
}

// putTarget makes PutInput's cheap checks: the blob when the archive holds
// it already, else the claim (the bytes the blob may have checked
// against size).
func (s *Service) putTarget(ctx context.Context, agentID, claimID, sum string, size int64) (*dotlab.ArchivedInput, *dotlab.Claim, error) {
	c, err := s.archiveTarget(ctx, agentID, claimID, sum)
	if err != nil {
		return nil, nil, err
	}
	if held, ok, err := s.archive.Size(ctx, sum); err != nil || ok {
		return &dotlab.ArchivedInput{SHA256: sum, Bytes: held}, nil, err
	}
	s.uploads.mu.Lock()
	defer s.uploads.mu.Unlock()
	room, err := s.archiveRoom(ctx, c, sum)
	if err != nil {
		return nil, nil, err
	}
	if size > room {
		return nil, nil, archiveTooLarge(claimID, size, s.archiveLimits, room)
	}
	return nil, c, nil
}

// archiveUploads are the bytes reserved by the uploads in flight, by
// claim id, so that uploads of different inputs of one claim at once
// cannot together pass its quota (each is checked against the blobs
// committed and the others' reservations). One server process: servers
// sharing an archive directory each keep their own.
type archiveUploads struct {
	mu       sync.Mutex
	reserved map[string]int64
}

// reserveRoom reserves, for an upload of sum (announced size bytes, -1:
// unknown), what it may take of c's quota: size, or all the room when
// unknown. It returns the room and the release to call when the upload
// ends; ETOOLARGE when size is over the room.
func (s *Service) reserveRoom(ctx context.Context, c *dotlab.Claim, sum string, size int64) (int64, func(), error) {
	u := &s.uploads
	u.mu.Lock()
	defer u.mu.Unlock()
	room, err := s.archiveRoom(ctx, c, sum)
	if err != nil {
		return 0, nil, err
	}
	if size > room {
		return 0, nil, archiveTooLarge(c.ID, size, s.archiveLimits, room)
	}
	if size >= 0 {
		room = size
	}
	if u.reserved == nil {
		u.reserved = map[string]int64{}
	}
	u.reserved[c.ID] += room
	return room, func() {
		u.mu.Lock()
		if u.reserved[c.ID] -= room; u.reserved[c.ID] == 0 {
			delete(u.reserved, c.ID)
		}
		u.mu.Unlock()
	}, nil
}

// archiveRoom is how many bytes the blob sum may have: the blob limit, or
// less when the claim's other archived inputs and the uploads in flight
// leave less of its quota. The caller holds s.uploads.mu.
func (s *Service) archiveRoom(ctx context.Context, c *dotlab.Claim, sum string) (int64, error) {
	used := s.uploads.reserved[c.ID]
	seen := map[string]bool{sum: true}
	for _, p := range c.Manifest.PinnedInputs() {
		if seen[p.SHA256] {
			continue
		}
		seen[p.SHA256] = true
		n, ok, err := s.archive.Size(ctx, p.SHA256)
		if err != nil {
			return 0, err
		}
		if ok {
			used += n
		}
	}
	return max(0, min(s.archiveLimits.MaxBlob, s.archiveLimits.PerClaim-used)), nil
}

func archiveTooLarge(claimID string, n int64, l ArchiveLimits, room int64) error {
	return dotlab.Errorf(dotlab.ETOOLARGE, "body: %d bytes is over what the archive keeps for this input of %s (%d bytes: at most %d a blob, %d a claim)", n, claimID, room, l.MaxBlob, l.PerClaim)
}

// Input opens the archived input sum of claimID for agentID (GET
// /claims/{id}/inputs/{sha256}): PutInput's checks, then the blob and its
// size. Errors: PutInput's, and ENOTFOUND when the archive lacks it.
func (s *Service) Input(ctx context.Context, agentID, claimID, sum string) (io.ReadCloser, int64, error) {
	if _, err := s.archiveTarget(ctx, agentID, claimID, sum); err != nil {
		return nil, 0, err
	}
	rc, n, err := s.archive.Open(ctx, sum)
	if errors.Is(err, inputarchive.ErrNotFound) {
		return nil, 0, dotlab.Errorf(dotlab.ENOTFOUND, "the archive of %s does not hold sha256 %s yet", claimID, sum)
	}
	return rc, n, err
}

// CanaryInterval is how often one agent may report on one claim.
const CanaryInterval = time.Minute

// ReportCanary keeps agentID's canary reports on claimID's pinned URLs
// (POST /claims/{id}/canary): any registered agent, at most once per
// CanaryInterval per claim, each URL one the manifest pins, each status
// serving, dead or different, one report per URL.
//
// Errors: ENOTFOUND (unknown claim); ERATELIMITED (reported within the
// interval); EINVALID (a URL not pinned, a status unknown, a URL twice, a
// detail over dotlab.MaxCanaryDetail or holding a control, format or
// unassigned character as agent names may not, no reports).
func (s *Service) ReportCanary(ctx context.Context, agentID, claimID string, reports []dotlab.CanaryReport) ([]dotlab.CanaryReport, error) {
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if last, ok, err := s.Store.LastCanaryReport(ctx, claimID, agentID); err != nil {
		return nil, err
	} else if ok && now.Sub(last) < CanaryInterval {
		return nil, dotlab.Errorf(dotlab.ERATELIMITED, "you reported on %s at %s: one canary report per claim per %s", claimID, last.UTC().Format(time.RFC3339), CanaryInterval)
	}
	if err := checkCanary(c.Manifest, reports); err != nil {
		return nil, err
	}
	if s.leaks != nil {
		for i, r := range reports {
			if err := s.leaks.Check(fmt.Sprintf("reports[%d].detail", i), r.Detail); err != nil {
				return nil, err
			}
		}
	}
	if err := s.Store.AddCanaryReports(ctx, claimID, agentID, now, reports); err != nil {
		return nil, err
	}
	return s.Store.LatestCanaryReports(ctx, claimID)
}

func checkCanary(m *dotlab.Manifest, reports []dotlab.CanaryReport) error {
	pinned := map[string]bool{}
	for _, p := range m.PinnedInputs() {
		if u, err := url.Parse(p.URL); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			pinned[p.URL] = true
		}
	}
	if len(reports) == 0 || len(reports) > len(pinned) {
		return dotlab.Errorf(dotlab.EINVALID, "reports: give one report for each of the manifest's pinned http(s) URLs you checked (1 to %d)", len(pinned))
	}
	seen := map[string]bool{}
	for i, r := range reports {
		switch {
		case !pinned[r.URL]:
			return dotlab.Errorf(dotlab.EINVALID, "reports[%d].url: not a URL the manifest pins for a dataset, helper, download or code archive", i)
		case seen[r.URL]:
			return dotlab.Errorf(dotlab.EINVALID, "reports[%d].url: reported twice", i)
		case r.Status != dotlab.CanaryServing && r.Status != dotlab.CanaryDead && r.Status != dotlab.CanaryDifferent:
			return dotlab.Errorf(dotlab.EINVALID, "reports[%d].status: must be serving, dead or different", i)
		case len(r.Detail) > dotlab.MaxCanaryDetail:
			return dotlab.Errorf(dotlab.EINVALID, "reports[%d].detail: at most %d bytes", i, dotlab.MaxCanaryDetail)
		case nameProblem(r.Detail) != "":
			// Shown beside other agents' reports: no escapes or reordering.
			return dotlab.Errorf(dotlab.EINVALID, "reports[%d].detail: %s: give plain text (\"HTTP 404\")", i, nameProblem(r.Detail))
		}
		seen[r.URL] = true
	}
	return nil
}
