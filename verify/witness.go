// Package verify checks a DotLab server's records against its transparency
// log, as `dotlab verify CLAIM|RUN` does (docs/verification.md): the signed
// checkpoint, its consistency with the last checkpoint this machine saw
// (kept like Go's checksum-database client keeps its latest note), each
// record's entry and inclusion proof, each record against its entry, and
// each run's comparisons recomputed from the manifest. It is agent-side
// code: it speaks the API through package client, reads entries with
// tlogfmt and checks notes and proofs with golang.org/x/mod/sumdb/note and
// transparency-dev/merkle.
package verify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// Known is what this machine keeps about one server's log: the verifier key
// it trusted at first use and the largest checkpoint it has verified (the
// signed note).
type Known struct {
	VerifierKey string `json:"verifier_key"`
	Checkpoint  string `json:"checkpoint"`
}

// Witness keeps Known per server base URL in the JSON file Path
// (<config dir>/logs.json; mode 0600).
type Witness struct {
	Path string
	// Key, when set, is the verifier key the log must have (`dotlab verify
	// --log-key`); otherwise the key seen first is pinned.
	Key string
	// Cosigning, when enabled, requires witnesses' cosignatures on the log
	// (`--witness-key`, `--witnesses`; docs/verification.md "Witnesses").
	Cosigning Cosigning
}

// Seen is a verified checkpoint and what the witness learnt getting it.
type Seen struct {
	Checkpoint tlogfmt.Checkpoint
	Notes      []string // e.g. "first use: pinned …", "consistent with …"
	// Witnessed is the tree size Cosigning's quorum of witnesses cosigned
	// (a prefix of Checkpoint's tree, or all of it); -1 when no
	// cosignatures are required.
	Witnessed int64

	info *apiv1.LogInfo // the answer Checkpoint came from
	key  string         // the log's verifier key
}

// Check fetches the server's signed checkpoint (GET /api/v1/log), verifies
// its signature with the pinned key (pinning the server's key at first
// use), proves it consistent with the last checkpoint kept for the server
// and keeps the larger of the two. It fails naming what does not check: a
// changed key, a bad signature, a fork or rewrite of history.
func (w Witness) Check(ctx context.Context, c *client.Client) (*Seen, error) {
	all, err := w.load()
	if err != nil {
		return nil, err
	}
	known := all[c.Server()]
	info, err := c.Log(ctx)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	seen := &Seen{Witnessed: -1, info: info}
	key := known.VerifierKey
	switch {
	case w.Key != "" && info.VerifierKey != w.Key:
		return nil, failf("log key: the server publishes %s, not the key given (%s)", info.VerifierKey, w.Key)
	case key == "":
		key = info.VerifierKey
		seen.Notes = append(seen.Notes, "first use of this server's log: pinned its verifier key "+key)
	case key != info.VerifierKey:
		return nil, failf("log key changed: this machine pinned %s, the server now publishes %s (a new log or a forged one; remove the server from %s only if you trust the change)", key, info.VerifierKey, w.Path)
	}
	cp, err := open(info.Checkpoint, key)
	if err != nil {
		return nil, &Failure{err}
	}
	seen.Checkpoint, seen.key = cp, key
	keep, cover := info.Checkpoint, int64(0)
	if known.Checkpoint != "" {
		old, err := open(known.Checkpoint, key)
		if err != nil {
			return nil, fmt.Errorf("the checkpoint kept in %s: %w", w.Path, err)
		}
		note, err := consistent(ctx, c, old, cp)
		if err != nil {
			return nil, &Failure{err}
		}
		seen.Notes = append(seen.Notes, note)
		if old.Size > cp.Size {
			keep = known.Checkpoint
		}
		cover = min(old.Size, cp.Size)
	}
	if w.Cosigning.Enabled() {
		// What this machine saw before must since have been witnessed: a
		// split view shown to it alone stays uncosigned.
		notes, covered, err := w.requireCosigned(ctx, c, info, key, cp, cover)
		if err != nil {
			return nil, err
		}
		seen.Notes, seen.Witnessed = append(seen.Notes, notes...), covered
	}
	all[c.Server()] = Known{VerifierKey: key, Checkpoint: keep}
	return seen, w.save(all)
}

// Failure is a log that does not verify: a changed key, a bad signature,
// a checkpoint inconsistent with the one kept. Other errors of Check are
// the server's answers or the network's.
type Failure struct{ Err error }

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

func failf(format string, args ...any) error { return &Failure{fmt.Errorf(format, args...)} }

// open verifies a signed checkpoint with vkey and parses it.
func open(signed, vkey string) (tlogfmt.Checkpoint, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return tlogfmt.Checkpoint{}, fmt.Errorf("log key %q: %w", vkey, err)
	}
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		return tlogfmt.Checkpoint{}, fmt.Errorf("checkpoint signature: %w", err)
	}
	cp, err := tlogfmt.ParseCheckpoint(n.Text)
	if err != nil {
		return cp, err
	}
	if cp.Origin != v.Name() {
		return cp, fmt.Errorf("checkpoint origin %q is not the key's name %q", cp.Origin, v.Name())
	}
	return cp, nil
}

// consistent proves that the smaller of a and b is a prefix of the larger
// with the server's consistency proof.
func consistent(ctx context.Context, c *client.Client, a, b tlogfmt.Checkpoint) (string, error) {
	small, large := a, b
	if small.Size > large.Size {
		small, large = b, a
	}
	forked := func(why string) error {
		return fmt.Errorf("log forked or rewrote history: the checkpoint of size %d (root %s) is not consistent with the one of size %d (root %s) this machine saw before: %s",
			b.Size, b64(b.Root[:]), a.Size, b64(a.Root[:]), why)
	}
	var hashes [][]byte
	if small.Size > 0 && small.Size < large.Size {
		p, err := c.LogConsistency(ctx, small.Size, large.Size)
		if err != nil {
			return "", forked(fmt.Sprintf("no consistency proof (%v)", err))
		}
		if hashes, err = decodeHashes(p.Proof); err != nil {
			return "", forked(err.Error())
		}
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(small.Size), uint64(large.Size), hashes, small.Root[:], large.Root[:]); err != nil {
		return "", forked(err.Error())
	}
	return fmt.Sprintf("checkpoint %d is consistent with checkpoint %d seen before", b.Size, a.Size), nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func decodeHashes(ss []string) ([][]byte, error) {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != tlogfmt.HashSize {
			return nil, fmt.Errorf("proof hash %d is not the base64 of 32 bytes", i)
		}
		out[i] = b
	}
	return out, nil
}

func (w Witness) load() (map[string]Known, error) {
	all := map[string]Known{}
	data, err := os.ReadFile(w.Path)
	if errors.Is(err, os.ErrNotExist) {
		return all, nil
	} else if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("%s: %w", w.Path, err)
	}
	return all, nil
}

// save writes all atomically (a temporary file renamed over the old one).
func (w Witness) save(all map[string]Known) error {
	if err := os.MkdirAll(filepath.Dir(w.Path), 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(w.Path), ".logs-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), w.Path)
}
