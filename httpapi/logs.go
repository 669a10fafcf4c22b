package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/strictjson"
)

// MaxLogBytes bounds an uploaded JSON-lines log.
const MaxLogBytes = 8 << 20

// logLine is one line of a run log (protocol.txt "Logs").
type logLine struct {
	T     string          `json:"t"`
	Level string          `json:"level"`
	Step  string          `json:"step"`
	Msg   string          `json:"msg"`
	Data  json.RawMessage `json:"data"`
}

// handlePutLogs stores the runner's logs.jsonl (PUT /jobs/{id}/logs): every
// line a strict JSON object with t, level, step and msg; no keys or tokens.
// The run's logs_uri then points at GET /jobs/{id}/logs.
func (s *Server) handlePutLogs(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxLogBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.writeError(w, r, dotlab.Errorf(dotlab.ETOOLARGE, "logs are over the limit of %d bytes", MaxLogBytes))
			return
		}
		s.writeError(w, r, dotlab.Errorf(dotlab.EINVALID, "could not read the logs"))
		return
	}
	var probs dotlab.Problems
	for i, line := range bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n")) {
		var l logLine
		if err := strictjson.Decode(line, &l); err != nil {
			probs.Add(fmt.Sprintf("line %d", i+1), "%v", err)
		} else if l.T == "" || l.Level == "" || l.Step == "" || l.Msg == "" {
			probs.Add(fmt.Sprintf("line %d", i+1), "needs t, level, step and msg")
		}
		if len(probs) >= 20 {
			break
		}
	}
	if err := probs.Err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.leaks.Check("logs", string(data)); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	if err := s.store.PutJobLogs(r.Context(), agentFrom(r).ID, id, data); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs_uri": "/api/v1/jobs/" + id + "/logs", "bytes": len(data)})
}

// handleLogs serves a job's JSON-lines log (public).
func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	data, err := s.store.JobLogs(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Write(data)
}
