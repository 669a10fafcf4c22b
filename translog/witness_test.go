package translog_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/internal/testing/witnesstest"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
	"golang.org/x/mod/sumdb/note"
)

// TestWitnessCosignsAndFollows409: on both engines the log sends its
// checkpoints to the real transparency-dev/witness, which cosigns the first
// (trust on first use) and then each larger one with its consistency
// proof; the served checkpoint carries the cosignature line, which a
// verifier knowing only the log's key ignores. When the log's record of
// what the witness cosigned is lost, the witness's 409 names its size and
// the log retries with the proof from there.
func TestWitnessCosignsAndFollows409(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			d := openDB(t, engine)
			l := d.open(t, translog.Options{})
			appendN(t, d, l, 0, 3)
			w := witnesstest.Start(t, "witness.test/"+string(engine), l.VerifierKey())
			wit, err := translog.ParseWitness(w.Flag)
			if err != nil {
				t.Fatal(err)
			}
			stop := runWitness(l, wit)
			waitCosignedSize(t, l, 3)
			appendN(t, d, l, 3, 5)
			waitCosignedSize(t, l, 8)
			checkServedCheckpoint(t, l, wit, 8)
			stop()
			if _, err := d.w.Exec(`DELETE FROM log_cosignatures`); err != nil {
				t.Fatal(err)
			}
			appendN(t, d, l, 8, 2)
			defer runWitness(l, wit)()
			waitCosignedSize(t, l, 10)
		})
	}
}

func runWitness(l *translog.Log, w translog.Witness) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.RunWitnesses(ctx, []translog.Witness{w}, translog.WitnessOptions{Every: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	return func() { cancel(); <-done }
}

func waitCosignedSize(t *testing.T, l *translog.Log, size int64) {
	t.Helper()
	for i := 0; i < 300; i++ {
		cs, err := l.Cosignatures(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 1 && cs[0].Size == size {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no cosignature of tree size %d within 15 s", size)
}

// checkServedCheckpoint reads /log/checkpoint: it opens with the log's key
// alone (the cosignature is an unknown signature to it) and carries the
// witness's valid cosignature of size.
func checkServedCheckpoint(t *testing.T, l *translog.Log, w translog.Witness, size int64) {
	t.Helper()
	resp, err := http.Get(serve(t, l).URL + translog.Prefix + "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	n, err := note.Open(body, note.VerifierList(l.Verifier()))
	if err != nil {
		t.Fatalf("the cosigned checkpoint does not open with the log's key alone: %v\n%s", err, body)
	}
	if !strings.HasPrefix(n.Text, fmt.Sprintf("%s\n%d\n", l.Origin(), size)) || len(n.UnverifiedSigs) != 1 {
		t.Fatalf("checkpoint %q with %d other signatures; want size %d and one cosignature", n.Text, len(n.UnverifiedSigs), size)
	}
	if at, ok := w.Verifier.Check(n.Text, n.UnverifiedSigs[0]); !ok || time.Since(at) > time.Hour {
		t.Fatalf("the served cosignature does not verify with the witness's key (time %s)", at)
	}
	if _, err := tlogfmt.ParseCheckpoint(n.Text); err != nil {
		t.Fatal(err)
	}
}
