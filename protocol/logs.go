package protocol

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// PutJobLogs is the upload-logs step (docs/protocol.md §6 "Logs"): the
// JSON-lines log of the run of claimID, attached once. Only the claim's
// runner may upload, after publishing its run, and only the bytes whose
// SHA-256 the run body pinned as logs_sha256. The log is then fixed: the
// same bytes again return the run unchanged (idempotent), other bytes are
// refused. On upload the log is judged against the run
// (dotlab.CheckLogCoverage) and the judgement stored on the run. It returns
// the run as it now stands.
//
// Errors: ENOTFOUND (unknown claim); ENOTOFFERED (not the claim's runner);
// EWINDOWCLOSED (the run is not published yet: publish first, with
// logs_sha256); ECONFLICT (logs already attached and these differ, or the
// run pinned no logs_sha256); EINVALID (the bytes' SHA-256 is not the one
// the run pinned).
func (s *Service) PutJobLogs(ctx context.Context, agentID, claimID string, logs []byte) (*dotlab.Run, error) {
	sum := sha256.Sum256(logs)
	got := hex.EncodeToString(sum[:])
	c, run, err := s.logsTarget(ctx, agentID, claimID, got)
	if err != nil || run.LogsUploadedAt != nil {
		return run, err // nil error: the same bytes again
	}
	cov := dotlab.CheckLogCoverage(c.Manifest, &run.Body, logs)
	covJSON, err := json.Marshal(cov)
	if err != nil {
		return nil, fmt.Errorf("encode log coverage: %w", err)
	}
	if _, err := s.Store.AddLogs(ctx, store.LogsWrite{Write: store.Write{At: s.now()}, ClaimID: claimID, AgentID: agentID, RunID: run.ID,
		SHA256: got, Logs: logs, Coverage: covJSON, Complete: cov.Complete}); err != nil {
		return nil, err
	}
	return s.Store.FindRun(ctx, run.ID) // not applied: a concurrent upload of the same bytes did it
}

// CheckJobLogs makes PutJobLogs' checks of who uploads and of the bytes'
// SHA-256 (sum, 64 lowercase hex) without the bytes themselves, so that a
// caller can refuse an upload before the costly work on its text
// (httpapi parses every line and screens it for secrets): it returns the
// run the logs would be attached to, with LogsUploadedAt set when these
// very bytes are attached already, or PutJobLogs' error for them.
func (s *Service) CheckJobLogs(ctx context.Context, agentID, claimID, sum string) (*dotlab.Run, error) {
	_, run, err := s.logsTarget(ctx, agentID, claimID, sum)
	return run, err
}

// logsTarget finds the claim and run that logs hashing to sum would be
// attached to, and checks they may be (PutJobLogs' errors).
func (s *Service) logsTarget(ctx context.Context, agentID, claimID, sum string) (*dotlab.Claim, *dotlab.Run, error) {
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return nil, nil, err
	}
	if c.RunnerID != agentID || c.State == dotlab.StateFunded {
		return nil, nil, dotlab.Errorf(dotlab.ENOTOFFERED, "job %s is not assigned to you: only its runner uploads the run's logs, from accepting the job on (%s, when it is offered to you)", claimID, dotlab.Go(dotlab.StepAccept, claimID))
	}
	if c.RunID == "" {
		return nil, nil, dotlab.Errorf(dotlab.EWINDOWCLOSED, "the run of %s is not published yet: publish it first (%s with logs_sha256, the SHA-256 of these logs), then upload them", claimID, dotlab.Go(dotlab.StepPublish, ""))
	}
	run, err := s.Store.FindRun(ctx, c.RunID)
	if err != nil {
		return nil, nil, err
	}
	if err := attachable(run, sum); err != nil {
		return nil, nil, err
	}
	return c, run, nil
}

// attachable says whether logs hashing to sum may be attached to run: nil
// when they are the pinned ones (and either not yet attached, or attached
// already: the caller tells the two apart by run.LogsUploadedAt).
func attachable(run *dotlab.Run, sum string) error {
	switch {
	case run.LogsUploadedAt != nil && run.LogsSHA256 == sum:
		return nil
	case run.LogsUploadedAt != nil:
		return dotlab.Errorf(dotlab.ECONFLICT, "the logs of run %s were uploaded already and are fixed (sha256 %s); these bytes hash to %s and cannot replace them", run.ID, pinnedOr(run.LogsSHA256), sum)
	case run.LogsSHA256 == "":
		return dotlab.Errorf(dotlab.ECONFLICT, "run %s was published without logs_sha256, so no logs can be attached to it: put logs_sha256 in the run body of your next run", run.ID)
	case run.LogsSHA256 != sum:
		return dotlab.Errorf(dotlab.EINVALID, "logs: these bytes hash to sha256 %s but run %s pins logs_sha256 %s: upload exactly the logs.jsonl you hashed", sum, run.ID, run.LogsSHA256)
	}
	return nil
}

func pinnedOr(s string) string {
	if s == "" {
		return "not pinned: uploaded before the run record fixed logs"
	}
	return s
}
