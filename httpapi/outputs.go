package httpapi

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/bytecache"
)

// Bounds of the output listings in memory at once (docs/threat-model.md
// "The public edge"): a listing is up to dotlab.MaxOutputListingBytes
// (32 MiB), so the uploads read at once and the listings read from the
// store at once are few, an upload's body must arrive within
// listingReadTime, and pinned listings (fixed once pinned) are served from
// one shared copy while they fit listingCacheBytes.
const (
	maxListingUploads = 1
	maxListingReads   = 2
	listingWait       = 30 * time.Second // how long a request waits for its turn
	listingReadTime   = time.Minute
	listingCacheBytes = 96 << 20
)

// listingBounds are the slots of listing uploads and store reads, and the
// served listings' cache.
type listingBounds struct {
	uploads, reads chan struct{}
	cache          *bytecache.Cache[[]byte]
}

func newListingBounds() listingBounds {
	return listingBounds{uploads: make(chan struct{}, maxListingUploads), reads: make(chan struct{}, maxListingReads),
		cache: bytecache.New[[]byte](listingCacheBytes)}
}

// take waits for a slot of sem (at most listingWait, or until ctx ends):
// the returned function gives it back; a wait that ends first is
// ERATELIMITED, to retry.
func take(ctx context.Context, sem chan struct{}, what string) (func(), error) {
	t := time.NewTimer(listingWait)
	defer t.Stop()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, dotlab.Errorf(dotlab.ERATELIMITED, "the server is busy with other %s (at most %d at once): retry in a few seconds", what, cap(sem))
}

// handlePutOutputs stores the caller's output listing for the record it is
// about to post on claim {id} (PUT /jobs/{id}/outputs; docs/protocol.md §6
// "Output listing"): at most dotlab.MaxOutputListingBytes (not the body
// limit), canonical JSON lines. Who and the claim's state are checked
// before the body is read (protocol MayPutOutputListing) and again before
// the listing is parsed (protocol PutOutputListing); at most
// maxListingUploads bodies are read at once, each within listingReadTime.
// It answers the pin to put in the record's output_listing.
func (s *Server) handlePutOutputs(w http.ResponseWriter, r *http.Request) error {
	if err := s.store.MayPutOutputListing(r.Context(), agentFrom(r).ID, r.PathValue("id")); err != nil {
		return err
	}
	release, err := take(r.Context(), s.listings.uploads, "output listing uploads")
	if err != nil {
		return err
	}
	defer release()
	data, err := readListing(w, r)
	if err != nil {
		return err
	}
	pin, err := s.store.PutOutputListing(r.Context(), agentFrom(r).ID, r.PathValue("id"), data)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, pin)
	return nil
}

// readListing reads an upload's body: at most dotlab.MaxOutputListingBytes
// (413 over it), within listingReadTime, into one buffer sized by a
// Content-Length within the limit.
func readListing(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(listingReadTime))
	var buf bytes.Buffer
	if n := r.ContentLength; n > dotlab.MaxOutputListingBytes {
		return nil, dotlab.Errorf(dotlab.ETOOLARGE, "the output listing is over the limit of %d bytes", dotlab.MaxOutputListingBytes)
	} else if n > 0 {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, dotlab.MaxOutputListingBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, dotlab.Errorf(dotlab.ETOOLARGE, "the output listing is over the limit of %d bytes", dotlab.MaxOutputListingBytes)
	case err != nil:
		return nil, dotlab.Errorf(dotlab.EINVALID, "could not read the output listing in time (%s): send it whole", listingReadTime)
	}
	return buf.Bytes(), nil
}

// handleOutputs serves the output listing a run or challenge {id} pinned
// (GET /runs/{id}/outputs, GET /challenges/{id}/outputs; public), its
// exact bytes (at most dotlab.MaxOutputListingBytes), or 404: from the
// shared copy when cached, else read from the store by at most
// maxListingReads requests at once.
func (s *Server) handleOutputs(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	data, ok := s.listings.cache.Get(id)
	if !ok {
		release, err := take(r.Context(), s.listings.reads, "output listing reads")
		if err != nil {
			return err
		}
		if data, ok = s.listings.cache.Get(id); !ok {
			data, err = s.store.OutputListing(r.Context(), id)
			if err == nil {
				s.listings.cache.Put(id, data, len(data))
			}
		}
		release()
		if err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
	return nil
}
