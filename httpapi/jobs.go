package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/strictjson"
)

// handleNextJob is GET /jobs/next: the job offered to the caller, or 204.
func (s *Server) handleNextJob(w http.ResponseWriter, r *http.Request) error {
	j, found, err := s.store.NextJob(r.Context(), agentFrom(r))
	if err != nil {
		return err
	}
	if !found {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	s.writeJSON(w, http.StatusOK, linkJob(j))
	return nil
}

// handleAcceptJob is POST /jobs/{id}/accept.
func (s *Server) handleAcceptJob(w http.ResponseWriter, r *http.Request) error {
	j, err := s.store.AcceptJob(r.Context(), agentFrom(r).ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	s.wake(j.ClaimID)
	s.writeJSON(w, http.StatusOK, linkJob(j))
	return nil
}

// handleDeclineJob is POST /jobs/{id}/decline with an optional reason
// (docs/protocol.md §4): {"reason": "capability_mismatch"} costs nothing;
// any other reason, {} or an empty body declines as reasonless.
func (s *Server) handleDeclineJob(w http.ResponseWriter, r *http.Request) error {
	var b apiv1.DeclineBody
	if err := s.readOptionalBody(w, r, &b, maxDeclineBody); err != nil {
		if dotlab.ErrorCode(err) == dotlab.EINVALID {
			return &dotlab.Error{Code: dotlab.EINVALID, Detail: append(dotlab.ErrorLines(err),
				`$: decline with no body, {} or {"reason": "<any text>"}; {"reason": "capability_mismatch"} costs nothing`)}
		}
		return err
	}
	if err := s.checkText(map[string]string{"$.reason": b.Reason}); err != nil {
		return err
	}
	j, err := s.store.DeclineJob(r.Context(), agentFrom(r).ID, r.PathValue("id"), b.Reason)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, linkJob(j))
	return nil
}

// MaxLogBytes bounds an uploaded JSON-lines log.
const MaxLogBytes = 8 << 20

// logLine is one line of a run log (spec/openapi.yaml LogLines, x-line-schema).
type logLine struct {
	T     string          `json:"t"`
	Level string          `json:"level"`
	Step  string          `json:"step"`
	Msg   string          `json:"msg"`
	Data  json.RawMessage `json:"data"`
}

// handlePutLogs attaches the runner's logs.jsonl to its published run (PUT
// /jobs/{id}/logs; docs/protocol.md §6 "Logs"): exactly the bytes whose
// SHA-256 the run pinned as logs_sha256, once (the same bytes again answer
// 200 as before; others 409); every line a strict JSON object with t,
// level, step and msg; no keys or tokens. Who uploads and the bytes' hash
// are checked first (store.CheckJobLogs), so only the runner's pinned
// bytes are parsed and screened, once: that costs seconds for 8 MiB, and
// anyone else's upload costs the server one hash. It answers with the
// server's check of the log against the run (dotlab.CheckLogCoverage).
func (s *Server) handlePutLogs(w http.ResponseWriter, r *http.Request) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxLogBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return dotlab.Errorf(dotlab.ETOOLARGE, "logs are over the limit of %d bytes", MaxLogBytes)
		}
		return dotlab.Errorf(dotlab.EINVALID, "could not read the logs")
	}
	id := r.PathValue("id")
	sum := sha256.Sum256(data)
	run, err := s.store.CheckJobLogs(r.Context(), agentFrom(r).ID, id, hex.EncodeToString(sum[:]))
	if err != nil {
		return err
	}
	if run.LogsUploadedAt == nil {
		if err := checkLogLines(data); err != nil {
			return err
		}
		if err := s.leaks.Check("logs", string(data)); err != nil {
			return err
		}
		if run, err = s.store.PutJobLogs(r.Context(), agentFrom(r).ID, id, data); err != nil {
			return err
		}
	}
	s.writeJSON(w, http.StatusOK, apiv1.LogsStored{LogsURI: "/api/v1/jobs/" + id + "/logs", Bytes: len(data),
		SHA256: run.LogsSHA256, RunID: run.ID, LogCoverage: run.LogCoverage})
	return nil
}

// checkLogLines requires every line of data to be a strict JSON log line
// with t, level, step and msg; it reports at most 20 problems.
func checkLogLines(data []byte) error {
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
	return probs.Err()
}

// handleLogs serves a job's JSON-lines log (public).
func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) error {
	data, err := s.store.JobLogs(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Write(data)
	return nil
}
