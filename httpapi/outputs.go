package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/dotlab/dotlab"
)

// handlePutOutputs stores the caller's output listing for the record it is
// about to post on claim {id} (PUT /jobs/{id}/outputs; docs/protocol.md §6
// "Output listing"): at most dotlab.MaxOutputListingBytes (not the body
// limit), canonical JSON lines. Who and the claim's state are checked
// before the listing is parsed (protocol PutOutputListing). It answers the
// pin to put in the record's output_listing.
func (s *Server) handlePutOutputs(w http.ResponseWriter, r *http.Request) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, dotlab.MaxOutputListingBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return dotlab.Errorf(dotlab.ETOOLARGE, "the output listing is over the limit of %d bytes", dotlab.MaxOutputListingBytes)
		}
		return dotlab.Errorf(dotlab.EINVALID, "could not read the output listing")
	}
	pin, err := s.store.PutOutputListing(r.Context(), agentFrom(r).ID, r.PathValue("id"), data)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, pin)
	return nil
}

// handleOutputs serves the output listing a run or challenge {id} pinned
// (GET /runs/{id}/outputs, GET /challenges/{id}/outputs; public), its
// exact bytes (at most dotlab.MaxOutputListingBytes), or 404.
func (s *Server) handleOutputs(w http.ResponseWriter, r *http.Request) error {
	data, err := s.store.OutputListing(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
	return nil
}
