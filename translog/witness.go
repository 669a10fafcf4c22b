package translog

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dotlab/dotlab/tlogfmt"
	"golang.org/x/mod/sumdb/tlog"
)

// Witness is a c2sp.org/tlog-witness witness the log submits its
// checkpoints to: its submission prefix (add-checkpoint is URL +
// "/add-checkpoint") and its cosignature/v1 verifier key.
type Witness struct {
	URL      string
	Verifier *tlogfmt.CosignatureVerifier
}

// MaxWitnesses bounds the witnesses of one log: a note holds at most 100
// signatures (golang.org/x/mod/sumdb/note), the log's among them.
const MaxWitnesses = 32

// ParseWitness parses `dotlab serve --witness URL=VERIFIER_KEY`: an http(s)
// URL without credentials, query or fragment, then '=' and the witness's
// cosignature/v1 verifier key (which holds no '=': its base64 is of 33
// bytes). It fails naming the part that is wrong.
func ParseWitness(s string) (Witness, error) {
	i := strings.LastIndex(s, "=")
	if i < 0 {
		return Witness{}, fmt.Errorf("--witness %q: want URL=VERIFIER_KEY", s)
	}
	raw, key := s[:i], s[i+1:]
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Witness{}, fmt.Errorf("--witness %q: the URL must be http(s)://host[/prefix] without credentials, query or fragment", s)
	}
	v, err := tlogfmt.NewCosignatureVerifier(key)
	if err != nil {
		return Witness{}, fmt.Errorf("--witness %q: %w", s, err)
	}
	return Witness{URL: strings.TrimSuffix(raw, "/"), Verifier: v}, nil
}

// WitnessError is a witness's refusal of add-checkpoint: its HTTP status
// and, for 409 Conflict, the tree size it cosigned last.
type WitnessError struct {
	Status int
	Size   int64 // with 409: the witness's latest cosigned size (-1 when the body did not say)
}

func (e *WitnessError) Error() string {
	switch e.Status {
	case http.StatusConflict:
		return fmt.Sprintf("409: the witness has cosigned tree size %d, not the old size sent (or the same size with another root)", e.Size)
	case http.StatusUnprocessableEntity:
		return "422: the consistency proof does not verify against the checkpoint the witness cosigned before (the log forked, or its database was rewritten)"
	case http.StatusNotFound:
		return "404: the witness does not know this log's origin (configure it with the log's origin and verifier key)"
	case http.StatusForbidden:
		return "403: the log's signature does not verify with the key the witness has for this origin"
	}
	return fmt.Sprintf("the witness answered %d", e.Status)
}

// maxWitnessAnswer bounds a witness's answer: signature lines or a size.
const maxWitnessAnswer = 64 << 10

// AddCheckpoint sends signed (the log's signed checkpoint cp) to w by
// c2sp.org/tlog-witness add-checkpoint, with the consistency proof from
// tree size old (0: none), and returns the first cosignature line of w's
// key that verifies on cp ("— name base64\n") and its time. A
// refusal is a *WitnessError; an answer without a valid cosignature by w's
// key is an error too.
func AddCheckpoint(ctx context.Context, hc *http.Client, w Witness, old int64, proof tlog.TreeProof, cp tlogfmt.Checkpoint, signed []byte) (string, time.Time, error) {
	var body bytes.Buffer
	fmt.Fprintf(&body, "old %d\n", old)
	for _, h := range proof {
		body.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
	}
	body.WriteString("\n")
	body.Write(signed)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL+"/add-checkpoint", &body)
	if err != nil {
		return "", time.Time{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", time.Time{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxWitnessAnswer+1))
	if err != nil || len(data) > maxWitnessAnswer {
		return "", time.Time{}, fmt.Errorf("witness answer: unreadable or over %d bytes", maxWitnessAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		e := &WitnessError{Status: resp.StatusCode, Size: -1}
		if n, err := strconv.ParseInt(strings.TrimSuffix(string(data), "\n"), 10, 64); err == nil && n >= 0 && resp.StatusCode == http.StatusConflict {
			e.Size = n
		}
		return "", time.Time{}, e
	}
	return validCosignatures(w, cp, string(data))
}

// validCosignatures returns the first line of lines that is w's valid
// cosignature of cp, and its time. One line is kept per witness whatever
// it answers, so that the served note stays within a note's 100
// signatures.
func validCosignatures(w Witness, cp tlogfmt.Checkpoint, lines string) (string, time.Time, error) {
	sigs, err := tlogfmt.SignatureLines(lines)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("witness answer: %w", err)
	}
	for _, s := range sigs {
		if at, ok := w.Verifier.Check(cp.Text(), s); ok {
			return "— " + s.Name + " " + s.Base64 + "\n", at, nil
		}
	}
	return "", time.Time{}, fmt.Errorf("witness answer: no valid cosignature/v1 by %s on tree size %d", w.Verifier.Key(), cp.Size)
}

// WitnessOptions tune Log.RunWitnesses.
type WitnessOptions struct {
	Client     *http.Client  // default: a client with a 10 s timeout
	Every      time.Duration // how often to look for a new checkpoint (default 1 s)
	MaxBackoff time.Duration // the longest wait after failures (default 5 min)
	Logger     *slog.Logger  // required
}

// RunWitnesses submits the log's checkpoints to ws until ctx ends, one
// goroutine per witness: every opt.Every it takes the current checkpoint
// and, when the witness has not cosigned its tree size, sends it with the
// consistency proof from the size the witness cosigned last (kept in
// log_cosignatures, or learnt from a 409 answer), then keeps the
// cosignature. Failures are logged and retried with exponential backoff up
// to opt.MaxBackoff. It runs beside the writes and never blocks them.
func (l *Log) RunWitnesses(ctx context.Context, ws []Witness, opt WitnessOptions) {
	if opt.Client == nil {
		opt.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opt.Every <= 0 {
		opt.Every = time.Second
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = 5 * time.Minute
	}
	done := make(chan struct{}, len(ws))
	for _, w := range ws {
		go func() {
			defer func() { done <- struct{}{} }()
			l.witnessLoop(ctx, w, opt)
		}()
	}
	for range ws {
		<-done
	}
}

// witnessState is what one witness's loop knows: the tree size the
// witness cosigned last (-1: not read yet) and the size this loop last
// got cosigned.
type witnessState struct{ known, cosigned int64 }

func (l *Log) witnessLoop(ctx context.Context, w Witness, opt WitnessOptions) {
	st := witnessState{known: -1, cosigned: -1}
	var backoff time.Duration
	wait := time.Duration(0)
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := l.witnessOnce(ctx, w, &st, opt.Client)
		switch {
		case err == nil:
			backoff, wait = 0, opt.Every
		case ctx.Err() != nil:
			return
		default:
			backoff = min(max(2*backoff, opt.Every), opt.MaxBackoff)
			wait = backoff
			opt.Logger.Warn("witness did not cosign the log's checkpoint", "witness", w.URL, "key", w.Verifier.Name(), "error", err.Error(), "retry_in", backoff)
		}
	}
}

// witnessOnce submits the current checkpoint to w when w has not cosigned
// its size, following at most two 409 answers to the witness's size.
func (l *Log) witnessOnce(ctx context.Context, w Witness, st *witnessState, hc *http.Client) error {
	cp, signed, err := l.Checkpoint(ctx)
	if err != nil || cp.Size == 0 || cp.Size == st.cosigned {
		return err
	}
	if st.known < 0 {
		if st.known, err = l.cosignedSize(ctx, w.Verifier.Key()); err != nil {
			return err
		}
	}
	for range 3 {
		old := st.known
		if old > cp.Size {
			return fmt.Errorf("the witness has cosigned tree size %d, larger than this log's %d: it saw another history of this log (a fork, or this database restored from an older copy)", old, cp.Size)
		}
		var proof tlog.TreeProof
		if old > 0 && old < cp.Size {
			if proof, err = l.ConsistencyProof(ctx, old, cp.Size); err != nil {
				return err
			}
		}
		lines, at, err := AddCheckpoint(ctx, hc, w, old, proof, cp, signed)
		var refused *WitnessError
		if errors.As(err, &refused) && refused.Status == http.StatusConflict && refused.Size >= 0 && refused.Size != old {
			st.known = refused.Size
			continue
		}
		if err != nil {
			return err
		}
		st.known, st.cosigned = cp.Size, cp.Size
		return l.keepCosignature(ctx, Cosigned{Witness: w.Verifier.Key(), Size: cp.Size, Checkpoint: signed, Cosignature: lines, At: at})
	}
	return errors.New("the witness kept answering 409 with another tree size")
}

// cosignedSize is the tree size witness key cosigned last as stored (0:
// none).
func (l *Log) cosignedSize(ctx context.Context, key string) (int64, error) {
	var n int64
	err := l.r.QueryRowContext(ctx, `SELECT size FROM log_cosignatures WHERE witness = $1`, key).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}
