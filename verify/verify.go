package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Report is what a verification found: the checkpoint it checked against,
// every check that passed and every failure, each naming its record.
type Report struct {
	Subject    string
	Checkpoint tlogfmt.Checkpoint
	OK         []string
	Failures   []string
	// Signed and Unsigned count the runs, challenges and votes checked
	// that carry a verified signature and that carry none (accepted
	// unsigned: docs/verification.md §7); Unsigned names the latter.
	Signed   int
	Unsigned []string
	// Unbound names the signed records among Signed whose statement is
	// v1: it names no log and no agent, so it may as well have been made
	// for another server and replayed here (docs/verification.md §7).
	Unbound []string
}

// Passed reports whether nothing failed.
func (r *Report) Passed() bool { return len(r.Failures) == 0 }

func (r *Report) ok(format string, args ...any) { r.OK = append(r.OK, fmt.Sprintf(format, args...)) }
func (r *Report) fail(format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

// Verifier checks one server's records.
type Verifier struct {
	Client  *client.Client
	Witness Witness
}

// Claim verifies every record of claim id (docs/verification.md "dotlab
// verify"). The error is for what stopped the check (the server
// unreachable, the claim unknown); what did not check is in the report.
func (v Verifier) Claim(ctx context.Context, id string) (*Report, error) {
	return v.check(ctx, id, "claim "+id, nil)
}

// Run verifies run id: its claim's listing, the run's entry and its
// comparisons recomputed from the manifest.
func (v Verifier) Run(ctx context.Context, id string) (*Report, error) {
	run, err := v.Client.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	only := map[tlogfmt.Key]bool{{Type: tlogfmt.TypeClaim, ID: run.ClaimID}: true, {Type: tlogfmt.TypeRun, ID: id}: true,
		{Type: tlogfmt.TypeEnvelope, ID: tlogfmt.EnvelopeID(tlogfmt.TypeRun, id)}: true}
	return v.check(ctx, run.ClaimID, "run "+id, only)
}

// check verifies claim id's records, limited to the keys in only when it
// is not nil. Records are read before the checkpoint, so that every record
// read is in the tree the checkpoint signs once its entry is integrated (a
// record commits with its entry pending; the log's sequencer integrates it
// within a second: readLog waits for that).
func (v Verifier) check(ctx context.Context, id, subject string, only map[tlogfmt.Key]bool) (*Report, error) {
	rs, err := fetchRecords(ctx, v.Client, id)
	if err != nil {
		return nil, err
	}
	rep, seen, logged, ok := v.readLog(ctx, id, subject, rs, only)
	if !ok {
		return rep, nil
	}
	if err := v.witnessed(ctx, rep, seen, logged, only); err != nil {
		return rep, nil
	}
	var later map[tlogfmt.Key]bool
	if unread(rs, logged, only) {
		// A record made after the records were read is in the log but was
		// not read: read again before calling it deleted. What the second
		// read finds that neither the first read nor the tree holds was
		// made after the checkpoint (on a busy claim, or by another server
		// process): it is left for the next verification.
		if again, err := fetchRecords(ctx, v.Client, id); err == nil {
			later = madeLater(rs, again, logged)
			rs = again
		}
	}
	matchRecords(rep, rs, logged, only, later, func(k tlogfmt.Key) []byte {
		e, err := v.Client.LogEntry(ctx, string(k.Type), k.ID, rep.Checkpoint.Size)
		if err != nil {
			return nil
		}
		return []byte(e.Entry)
	})
	v.checkSignatures(ctx, rep, rs, only)
	checkManifest(rep, rs)
	checkChallenges(rep, rs)
	v.checkOutputListings(ctx, rep, rs, func(recordID string) bool {
		return only == nil || only[tlogfmt.Key{Type: tlogfmt.TypeRun, ID: recordID}] || only[tlogfmt.Key{Type: tlogfmt.TypeChallenge, ID: recordID}]
	})
	if rs.run != nil {
		checkComparisons(rep, rs)
		v.checkLogs(ctx, rep, rs.run)
	}
	return rep, nil
}

// PendingWait bounds how long verification waits for records whose log
// entries are still pending (written with the record, not yet integrated
// by the log's sequencer, which takes well under a second).
const PendingWait = 5 * time.Second

// readLog checks the log's checkpoint and reads the entries of claim id in
// its tree. While a record of rs has no entry there, it reads both again,
// every pendingPoll, for at most PendingWait: the record's entry may be
// pending. It returns the checkpoint seen with the entries; ok is false when the checkpoint or the entries could not be
// read (said in the report).
func (v Verifier) readLog(ctx context.Context, id, subject string, rs *records, only map[tlogfmt.Key]bool) (*Report, *Seen, map[tlogfmt.Key]loggedEntry, bool) {
	deadline := time.Now().Add(PendingWait)
	for {
		rep := &Report{Subject: subject}
		seen, err := v.Witness.Check(ctx, v.Client)
		if err != nil {
			rep.fail("%v", err)
			return rep, nil, nil, false
		}
		rep.Checkpoint = seen.Checkpoint
		rep.OK = append(rep.OK, seen.Notes...)
		rep.ok("checkpoint %s size %d root %s: signature verified", seen.Checkpoint.Origin, seen.Checkpoint.Size, b64(seen.Checkpoint.Root[:]))
		logged := map[tlogfmt.Key]loggedEntry{}
		if seen.Checkpoint.Size > 0 { // an empty tree holds no entry: every record is still pending
			err = v.Client.EachLogClaimPage(ctx, id, seen.Checkpoint.Size, func(lc *apiv1.LogClaim) error {
				return checkInclusion(rep, seen.Checkpoint, id, lc, logged)
			})
		}
		if err != nil {
			rep.fail("log entries of %s: %v", id, err)
			return rep, nil, nil, false
		}
		if !notLogged(rs, logged, only) || !time.Now().Before(deadline) || ctx.Err() != nil {
			return rep, seen, logged, true
		}
		select {
		case <-time.After(pendingPoll):
		case <-ctx.Done():
		}
	}
}

const pendingPoll = 200 * time.Millisecond

// notLogged reports whether a record of rs (within only) has no entry in
// logged.
func notLogged(rs *records, logged map[tlogfmt.Key]loggedEntry, only map[tlogfmt.Key]bool) bool {
	for _, x := range rs.expectations() {
		k := x.entry.Key()
		if _, ok := logged[k]; !ok && (only == nil || only[k]) {
			return true
		}
	}
	return false
}

// witnessed requires the witnesses' cosignatures (Witness.Cosigning) to
// cover the entries checked; a failure is in rep and returned.
func (v Verifier) witnessed(ctx context.Context, rep *Report, seen *Seen, logged map[tlogfmt.Key]loggedEntry, only map[tlogfmt.Key]bool) error {
	last := int64(-1)
	for k, e := range logged {
		if (only == nil || only[k]) && e.index > last {
			last = e.index
		}
	}
	notes, err := v.Witness.CoverWitnessed(ctx, v.Client, seen, last)
	if err != nil {
		rep.fail("%v", err)
		return err
	}
	rep.OK = append(rep.OK, notes...)
	return nil
}

// checkLogs hashes the run's uploaded logs against the SHA-256 the run
// pinned (and logged).
func (v Verifier) checkLogs(ctx context.Context, rep *Report, r *dotlab.Run) {
	if r.LogsSHA256 == "" || r.LogsUploadedAt == nil {
		return
	}
	logs, err := v.Client.Logs(ctx, r.ClaimID)
	if err != nil {
		rep.fail("run %s: its logs cannot be read: %v", r.ID, err)
		return
	}
	sum := sha256.Sum256(logs)
	if got := hex.EncodeToString(sum[:]); got != r.LogsSHA256 {
		rep.fail("run %s: the served logs hash to %s, the run pinned %s", r.ID, got, r.LogsSHA256)
		return
	}
	rep.ok("run %s: logs.jsonl (%d bytes) hashes to the pinned logs_sha256", r.ID, len(logs))
}

// checkInclusion verifies each entry's inclusion proof in one page
// against cp and adds the entries that verified to out, by key, keeping
// only the SHA-256 of each entry's bytes (memory stays bounded by the
// number of records, not their size). An error stops the reading: a page
// for another tree size.
func checkInclusion(rep *Report, cp tlogfmt.Checkpoint, claimID string, lc *apiv1.LogClaim, out map[tlogfmt.Key]loggedEntry) error {
	if lc.TreeSize != cp.Size {
		return fmt.Errorf("proofs for tree size %d, asked for %d", lc.TreeSize, cp.Size)
	}
	for _, e := range lc.Entries {
		data := []byte(e.Entry)
		l, err := tlogfmt.Decode(data)
		if err != nil {
			rep.fail("log entry %d: %v", e.Index, err)
			continue
		}
		if l.ClaimID != claimID {
			rep.fail("log entry %d (%s) belongs to %s, not %s", e.Index, l.Key(), l.ClaimID, claimID)
			continue
		}
		hashes, err := decodeHashes(e.InclusionProof)
		if err == nil {
			leaf := rfc6962.DefaultHasher.HashLeaf(data)
			err = proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(e.Index), uint64(cp.Size), leaf, hashes, cp.Root[:])
		}
		if err != nil {
			rep.fail("log entry %d (%s): inclusion proof does not lead to the checkpoint's root: %v", e.Index, l.Key(), err)
			continue
		}
		out[l.Key()] = loggedEntry{index: e.Index, sum: sha256.Sum256(data)}
	}
	return nil
}

// loggedEntry is an entry whose inclusion verified: its index and the
// SHA-256 of its bytes.
type loggedEntry struct {
	index int64
	sum   [32]byte
}

// matchRecords checks that every record has its entry, equal to the
// record, and that every entry (but offers, which the API shows no record
// of) has its record: an envelope entry without its envelope is a
// signature the server dropped. Records whose keys are in later (made
// after the checkpoint) are only reported, not checked. entry fetches a
// logged entry's bytes again, to name what changed in one that differs.
func matchRecords(rep *Report, rs *records, logged map[tlogfmt.Key]loggedEntry, only, later map[tlogfmt.Key]bool, entry func(tlogfmt.Key) []byte) {
	want := map[tlogfmt.Key]bool{}
	for _, x := range rs.expectations() {
		k := x.entry.Key()
		if only != nil && !only[k] {
			continue
		}
		if later[k] {
			rep.ok("%s: made after the checkpoint of size %d, checked next time", x.label, rep.Checkpoint.Size)
			continue
		}
		want[k] = true
		l, ok := logged[k]
		if !ok {
			rep.fail("%s is not in the log (no entry with a valid proof in the tree of size %d, read again for %s while it might be pending; GET /api/v1/log/entries/{type}/{id} says whether the server holds it pending)", x.label, rep.Checkpoint.Size, PendingWait)
			continue
		}
		data, err := x.entry.Encode()
		if err != nil {
			rep.fail("%s: %v", x.label, err)
			continue
		}
		if sha256.Sum256(data) != l.sum {
			rep.fail("%s differs from its log entry %d: %s changed since it was logged", x.label, l.index, changedFields(data, entry(k)))
			continue
		}
		rep.ok("%s: log entry %d, included", x.label, l.index)
	}
	for _, k := range sortedKeys(logged) {
		l := logged[k]
		if want[k] || (only != nil && !only[k]) {
			continue
		}
		switch k.Type {
		case tlogfmt.TypeOffer:
			rep.ok("%s: log entry %d, included", k, l.index)
		case tlogfmt.TypeCommitment:
			checkCommitment(rep, rs, k, l.index, entry(k))
		default:
			rep.fail("%s (log entry %d) is missing from the server's records: deleted or hidden after it was logged", describe(k), l.index)
		}
	}
}

// checkCommitment checks a sealed vote's logged commitment (key k, log
// entry index, bytes data; docs/mechanism.md §4a): a decided vote's salt,
// vote and rationale must hash to it; a commitment without a decided vote
// (the dispute still sealed, or the seat abstained) is included as it is.
func checkCommitment(rep *Report, rs *records, k tlogfmt.Key, index int64, data []byte) {
	var rec tlogfmt.CommitmentRecord
	l, err := tlogfmt.Decode(data)
	if err == nil {
		err = json.Unmarshal(l.Record, &rec)
	}
	if err != nil {
		rep.fail("%s (log entry %d): %v", k, index, err)
		return
	}
	for _, v := range rs.votes {
		if tlogfmt.VoteID(rs.claim.ID, v.ReviewerID) != k.ID {
			continue
		}
		if v.Salt == "" || dotlab.VoteCommitment(rs.claim.ID, v.ReviewerID, v.Vote, v.Rationale, v.Salt) != rec.Commitment {
			rep.fail("the sealed vote of %s does not match its commitment (log entry %d): its vote, rationale or salt changed after it was committed", v.ReviewerID, index)
			return
		}
		rep.ok("sealed vote of %s: matches its commitment, log entry %d", v.ReviewerID, index)
		return
	}
	rep.ok("%s: log entry %d, included (not revealed)", k, index)
}

// madeLater returns the keys of the records the second read (again) found
// that neither the first read (first) nor the tree (logged) holds. The
// first read came before the checkpoint, so each of its records must be
// in the tree; these came after it.
func madeLater(first, again *records, logged map[tlogfmt.Key]loggedEntry) map[tlogfmt.Key]bool {
	before := map[tlogfmt.Key]bool{}
	for _, x := range first.expectations() {
		before[x.entry.Key()] = true
	}
	later := map[tlogfmt.Key]bool{}
	for _, x := range again.expectations() {
		k := x.entry.Key()
		if _, ok := logged[k]; !ok && !before[k] {
			later[k] = true
		}
	}
	return later
}

// unread reports whether an entry that needs a record has none in rs.
func unread(rs *records, logged map[tlogfmt.Key]loggedEntry, only map[tlogfmt.Key]bool) bool {
	have := map[tlogfmt.Key]bool{}
	for _, x := range rs.expectations() {
		have[x.entry.Key()] = true
	}
	for k := range logged {
		if !have[k] && (only == nil || only[k]) && k.Type != tlogfmt.TypeOffer && k.Type != tlogfmt.TypeCommitment {
			return true
		}
	}
	return false
}

func describe(k tlogfmt.Key) string {
	if k.Type == tlogfmt.TypeEnvelope {
		return "the signature " + k.ID
	}
	if k.Type == tlogfmt.TypeMessage {
		return "lab message " + k.ID
	}
	return k.String()
}

func sortedKeys(m map[tlogfmt.Key]loggedEntry) []tlogfmt.Key {
	keys := make([]tlogfmt.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]].index < m[keys[j]].index })
	return keys
}

// changedFields names the record fields whose values differ between the
// entry built from the served record and the logged one.
func changedFields(served, logged []byte) string {
	var a, b struct {
		Record map[string]json.RawMessage `json:"record"`
	}
	if json.Unmarshal(served, &a) != nil || json.Unmarshal(logged, &b) != nil {
		return "the record"
	}
	var diff []string
	for k, v := range a.Record {
		if w, ok := b.Record[k]; !ok || !bytes.Equal(v, w) {
			diff = append(diff, fmt.Sprintf("%s (logged %s, served %s)", k, clip(b.Record[k]), clip(v)))
		}
	}
	for k := range b.Record {
		if _, ok := a.Record[k]; !ok {
			diff = append(diff, k+" (logged, not served)")
		}
	}
	sort.Strings(diff)
	if len(diff) == 0 {
		return "the entry's type, claim or id"
	}
	return strings.Join(diff, ", ")
}

func clip(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	if len(b) > 80 {
		return string(b[:77]) + "…"
	}
	return string(b)
}

// checkManifest recomputes the manifest's RFC 8785 identity.
func checkManifest(rep *Report, rs *records) {
	h, err := manifest.Hash(rs.manifest)
	switch {
	case err != nil:
		rep.fail("claim %s: the served manifest does not parse: %v", rs.claim.ID, err)
	case h != rs.claim.ManifestHash:
		rep.fail("claim %s: the served manifest hashes to %s, the claim says %s", rs.claim.ID, h, rs.claim.ManifestHash)
	default:
		rep.ok("claim %s: manifest identity %s recomputed", rs.claim.ID, h)
	}
}

// checkComparisons recomputes the run's comparisons and outcome from the
// manifest and the run's submitted body (dotlab.EvaluateRun, Decide).
func checkComparisons(rep *Report, rs *records) {
	r := rs.run
	m, err := manifest.Parse(rs.manifest)
	if err != nil {
		rep.fail("run %s: cannot recompute: %v", r.ID, err)
		return
	}
	body := r.Body
	cs, err := dotlab.EvaluateRun(m, &body)
	if err != nil {
		rep.fail("run %s: the manifest refuses the run as published: %s", r.ID, strings.Join(dotlab.ErrorDetail(err), "; "))
		return
	}
	if r.Outcome != body.Outcome {
		rep.fail("run %s: outcome %s, but its body declares %s", r.ID, r.Outcome, body.Outcome)
		return
	}
	if len(cs) != len(r.Comparisons) {
		rep.fail("run %s: %d comparisons recomputed, the run shows %d", r.ID, len(cs), len(r.Comparisons))
		return
	}
	for i, c := range cs {
		if c != r.Comparisons[i] {
			rep.fail("run %s: comparison %s recomputed as rerun %s, difference %s, allowed %s, match %t; the run shows rerun %s, difference %s, allowed %s, match %t",
				r.ID, c.Name, c.Rerun, c.Difference, c.Allowed, c.Match, r.Comparisons[i].Rerun, r.Comparisons[i].Difference, r.Comparisons[i].Allowed, r.Comparisons[i].Match)
			return
		}
	}
	rep.ok("run %s: %d comparisons and outcome %s recomputed from the manifest", r.ID, len(cs), r.Outcome)
}

// Print writes the report: one "ok" line per check that passed (when
// verbose), one "FAIL" line per failure, and a last line with the verdict.
func (r *Report) Print(w io.Writer, verbose bool) {
	if verbose {
		for _, l := range r.OK {
			fmt.Fprintln(w, "ok    "+l)
		}
	}
	for _, l := range r.Failures {
		fmt.Fprintln(w, "FAIL  "+l)
	}
	if r.Signed+len(r.Unsigned) > 0 {
		fmt.Fprintf(w, "signatures: %d record(s) signed and verified, %d unsigned", r.Signed, len(r.Unsigned))
		if len(r.Unsigned) > 0 {
			fmt.Fprintf(w, " (%s: they rest on the log alone)", strings.Join(r.Unsigned, ", "))
		}
		fmt.Fprintln(w)
	}
	if len(r.Unbound) > 0 {
		fmt.Fprintf(w, "unbound: %d signed record(s) name no log or agent (v1 statements: %s): their signatures are their agents', but not replay-protected: nothing shows they were made for this log\n",
			len(r.Unbound), strings.Join(r.Unbound, ", "))
	}
	if r.Passed() {
		fmt.Fprintf(w, "%s verified: %d checks passed against checkpoint %s size %d\n", r.Subject, len(r.OK), r.Checkpoint.Origin, r.Checkpoint.Size)
		return
	}
	fmt.Fprintf(w, "%s does NOT verify: %d failure(s), %d checks passed\n", r.Subject, len(r.Failures), len(r.OK))
}

// TargetMemoryLimit is the soft memory limit Target runs under
// (runtime/debug.SetMemoryLimit).
const TargetMemoryLimit = 160 << 20

// Target verifies target — a claim id (DL-0001) or else a run id — on the
// server c, keeping the log's checkpoint in the witness file wit.Path (and
// requiring the verifier key wit.Key when set and the cosignatures of
// wit.Cosigning when enabled), and prints the report to w. It
// returns an error when anything failed, naming how many checks.
//
// Memory: the log is read page by page (client.EachLogClaimPage) and only
// a hash of each entry is kept, so memory grows with the number of records
// alone; unless the process has a memory limit already (GOMEMLIMIT), Target
// sets a soft one of TargetMemoryLimit, so that the collector keeps a
// claim with 100,000 room messages under 256 MiB resident.
func Target(ctx context.Context, c *client.Client, wit Witness, target string, w io.Writer, verbose bool) error {
	if debug.SetMemoryLimit(-1) == math.MaxInt64 {
		debug.SetMemoryLimit(TargetMemoryLimit)
	}
	if _, _, err := wit.Cosigning.Parse(); wit.Cosigning.Enabled() && err != nil {
		return err
	}
	v := Verifier{Client: c, Witness: wit}
	check := v.Run
	if dotlab.ValidClaimID(target) {
		check = v.Claim
	}
	rep, err := check(ctx, target)
	if err != nil {
		return err
	}
	rep.Print(w, verbose)
	if !rep.Passed() {
		return fmt.Errorf("%s: %d check(s) failed", rep.Subject, len(rep.Failures))
	}
	return nil
}
