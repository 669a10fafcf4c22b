package verify

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/tlogfmt"
	"golang.org/x/mod/sumdb/note"
)

// Cosigning is the witness policy of `dotlab verify --witness-key KEY
// --witnesses N` and of the agent commands: the log's checkpoints must
// carry c2sp.org/tlog-cosignature cosignatures (Ed25519 cosignature/v1)
// by Need of the witness keys Keys, which the user gives. Keys the server
// names are never trusted. The zero Cosigning requires none.
type Cosigning struct {
	Keys []string // cosignature/v1 verifier keys, "<name>+<key id>+<base64(0x04 ‖ key)>"
	Need int      // how many must cosign; 0: all of Keys
	// Wait bounds how long to wait for the witnesses to cosign a tree that
	// holds the entries checked (default 5 s): a new entry is cosigned a
	// moment after it is logged.
	Wait  time.Duration
	Clock dotlab.Clock // default dotlab.SystemClock
}

// Enabled reports whether cosignatures are required.
func (p Cosigning) Enabled() bool { return len(p.Keys) > 0 || p.Need != 0 }

// CoverWitnessed requires seen's checkpoint to be cosigned as far as entry
// index last (the largest of the entries checked), waiting for the
// witnesses as requireCosigned does; nothing when no cosignatures are
// required or they cover it already.
func (w Witness) CoverWitnessed(ctx context.Context, c *client.Client, seen *Seen, last int64) ([]string, error) {
	if !w.Cosigning.Enabled() || seen.Witnessed > last || seen.info == nil {
		return nil, nil
	}
	notes, covered, err := w.requireCosigned(ctx, c, seen.info, seen.key, seen.Checkpoint, last+1)
	if err == nil {
		seen.Witnessed = covered
	}
	return notes, err
}

// Parse checks the policy and returns its verifiers and quorum, naming the
// flag at fault.
func (p Cosigning) Parse() ([]*tlogfmt.CosignatureVerifier, int, error) {
	need := p.Need
	if need == 0 {
		need = len(p.Keys)
	}
	switch {
	case need < 0:
		return nil, 0, fmt.Errorf("--witnesses %d: must be at least 1", p.Need)
	case need > len(p.Keys):
		return nil, 0, fmt.Errorf("--witnesses %d: only %d --witness-key given", p.Need, len(p.Keys))
	}
	var vs []*tlogfmt.CosignatureVerifier
	seen := map[string]bool{}
	for _, k := range p.Keys {
		v, err := tlogfmt.NewCosignatureVerifier(k)
		if err != nil {
			return nil, 0, fmt.Errorf("--witness-key: %w", err)
		}
		if seen[v.Name()] {
			return nil, 0, fmt.Errorf("--witness-key %q: a witness named %s is given twice", k, v.Name())
		}
		seen[v.Name()] = true
		vs = append(vs, v)
	}
	return vs, need, nil
}

// maxCosignedNotes bounds the cosigned checkpoints read from one answer.
const maxCosignedNotes = 64

// clockSkew is how far in the future a cosignature's timestamp may be.
const clockSkew = 10 * time.Minute

// cosigner is one witness's best cosignature found: the largest tree it
// cosigned and when.
type cosigner struct {
	v  *tlogfmt.CosignatureVerifier
	cp tlogfmt.Checkpoint
	at time.Time
}

// requireCosigned waits (up to p.Wait) until Need of the policy's witnesses
// have cosigned a checkpoint of at least cover entries, each consistent
// with cp (the checkpoint the records are checked against), reading
// GET /api/v1/log again while they have not. It returns the notes for the
// report and the covered size. A cosigned checkpoint that is not
// consistent with cp is a fork (*Failure), as is a log that stays
// uncovered.
func (w Witness) requireCosigned(ctx context.Context, c *client.Client, info *apiv1.LogInfo, vkey string, cp tlogfmt.Checkpoint, cover int64) ([]string, int64, error) {
	vs, need, err := w.Cosigning.Parse()
	if err != nil {
		return nil, 0, err
	}
	clock, wait := w.Cosigning.Clock, w.Cosigning.Wait
	if clock == nil {
		clock = dotlab.SystemClock{}
	}
	if wait <= 0 {
		wait = 5 * time.Second
	}
	deadline := clock.Now().Add(wait)
	for {
		found, err := bestCosigners(ctx, c, info, vkey, vs, cp, clock.Now())
		if err != nil {
			return nil, 0, err
		}
		if covered := quorumSize(found, need); len(found) >= need && covered >= cover {
			return []string{cosignedNote(found, need, len(vs), covered)}, covered, nil
		}
		if !clock.Now().Before(deadline) {
			return nil, 0, failf("not witnessed: %s; the entries checked need a tree of at least %d entries cosigned by %d of the %d witness keys given (a split view shown to this machine, or witnesses that are down)",
				describeCosigners(found, vs), cover, need, len(vs))
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, ctx.Err()
		case <-t.C:
		}
		if info, err = c.Log(ctx); err != nil {
			return nil, 0, fmt.Errorf("log: %w", err)
		}
	}
}

// bestCosigners finds, for each witness key, the largest checkpoint among
// the served ones that verifies with the log's key vkey and carries a valid
// cosignature by it (timestamp not in the future), and proves each
// consistent with cp.
func bestCosigners(ctx context.Context, c *client.Client, info *apiv1.LogInfo, vkey string, vs []*tlogfmt.CosignatureVerifier, cp tlogfmt.Checkpoint, now time.Time) ([]cosigner, error) {
	logV, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	notes := append([]string{info.Checkpoint}, info.CosignedCheckpoints...)
	best := map[string]cosigner{}
	for _, signed := range notes[:min(len(notes), maxCosignedNotes)] {
		n, err := note.Open([]byte(signed), note.VerifierList(logV))
		if err != nil {
			continue // not signed by the log: not a checkpoint of it
		}
		ncp, err := tlogfmt.ParseCheckpoint(n.Text)
		if err != nil || ncp.Origin != logV.Name() {
			continue
		}
		for _, v := range vs {
			for _, s := range n.UnverifiedSigs {
				at, ok := v.Check(n.Text, s)
				if ok && !at.After(now.Add(clockSkew)) && (best[v.Name()].v == nil || ncp.Size > best[v.Name()].cp.Size) {
					best[v.Name()] = cosigner{v, ncp, at}
				}
			}
		}
	}
	var out []cosigner
	for _, v := range vs {
		b, ok := best[v.Name()]
		if !ok {
			continue
		}
		if _, err := consistent(ctx, c, b.cp, cp); err != nil {
			return nil, failf("witness %s cosigned tree size %d (root %s) at %s, which is not consistent with the checkpoint served now (size %d, root %s): %v",
				v.Name(), b.cp.Size, b64(b.cp.Root[:]), b.at.Format(time.RFC3339), cp.Size, b64(cp.Root[:]), err)
		}
		out = append(out, b)
	}
	return out, nil
}

// quorumSize is the largest tree size that need of found cosigned (or a
// larger one each): the need-th largest of their sizes; -1 when fewer.
func quorumSize(found []cosigner, need int) int64 {
	if len(found) < need || need == 0 {
		return -1
	}
	sizes := make([]int64, len(found))
	for i, f := range found {
		sizes[i] = f.cp.Size
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] > sizes[j] })
	return sizes[need-1]
}

func describeCosigners(found []cosigner, vs []*tlogfmt.CosignatureVerifier) string {
	if len(found) == 0 {
		return fmt.Sprintf("no checkpoint the server serves carries a valid cosignature by any of the %d witness keys given", len(vs))
	}
	parts := make([]string, len(found))
	for i, f := range found {
		parts[i] = fmt.Sprintf("%s cosigned tree size %d at %s", f.v.Name(), f.cp.Size, f.at.Format(time.RFC3339))
	}
	return strings.Join(parts, ", ")
}

func cosignedNote(found []cosigner, need, given int, covered int64) string {
	return fmt.Sprintf("witnessed: a tree of %d entries or more is cosigned by %d of the %d witness keys given (%d required), each consistent with the checkpoint: %s",
		covered, len(found), given, need, describeCosigners(found, nil))
}
