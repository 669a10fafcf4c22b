package translog_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
			start := time.Now()
			appendN(t, d, l, 3, 5)
			waitCosignedSize(t, l, 8)
			t.Logf("5 appends to the witness's cosignature of the tree: %s (polling every 20 ms)", time.Since(start).Round(time.Millisecond))
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

// TestAddCheckpointRefusesHostileAnswers: a witness's answer is bounded
// and checked: signature lines that are not the witness's valid
// cosignature, an answer over 64 KiB and a 409 without a size are errors,
// never a kept cosignature; a flood of copies of one valid line keeps one.
func TestAddCheckpointRefusesHostileAnswers(t *testing.T) {
	d := openDB(t, sqlstoretest.Engines[0])
	l := d.open(t, translog.Options{})
	appendN(t, d, l, 0, 2)
	cp, signed, err := l.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	vkey := tlogfmt.CosignatureVerifierKey("witness.test/hostile", pub)
	good := cosignLine("witness.test/hostile", priv, vkey, cp.Text())
	for _, tc := range []struct {
		status int
		body   string
		want   string // error text; "" for the one line kept
	}{
		{200, "— witness.test/hostile AAAAAAAAAAAA\n", "no valid cosignature"},
		{200, strings.Repeat("x", 70<<10), "over 65536 bytes"},
		{200, "no signature line\n", "signature line"},
		{409, "many\n", "409: the witness has cosigned tree size -1"},
		{200, strings.Repeat(good, 500), ""},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		}))
		wit, err := translog.ParseWitness(srv.URL + "=" + vkey)
		if err != nil {
			t.Fatal(err)
		}
		line, _, err := translog.AddCheckpoint(context.Background(), srv.Client(), wit, 0, nil, cp, signed)
		srv.Close()
		switch {
		case tc.want == "" && (err != nil || line != good):
			t.Errorf("%d copies of a valid line: %q, %v; want the line once", 500, line, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("answer %d %.40q: %v; want an error naming %q", tc.status, tc.body, err, tc.want)
		}
	}
}

func cosignLine(name string, priv ed25519.PrivateKey, vkey, text string) string {
	v, _ := tlogfmt.NewCosignatureVerifier(vkey)
	ts := uint64(1700000000)
	raw := binary.BigEndian.AppendUint32(nil, v.KeyHash())
	raw = binary.BigEndian.AppendUint64(raw, ts)
	raw = append(raw, ed25519.Sign(priv, tlogfmt.CosignedMessage([]byte(text), ts))...)
	return "— " + name + " " + base64.StdEncoding.EncodeToString(raw) + "\n"
}

// TestParseWitness: `--witness URL=KEY` takes an http(s) URL and a
// cosignature/v1 key, refusing anything else by name.
func TestParseWitness(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	key := tlogfmt.CosignatureVerifierKey("witness.test/w", pub)
	w, err := translog.ParseWitness("https://witness.example/sub/=" + key)
	if err != nil || w.URL != "https://witness.example/sub" || w.Verifier.Key() != key {
		t.Fatalf("%+v %v", w, err)
	}
	_, logKey, _ := note.GenerateKey(rand.Reader, "witness.test/w")
	for _, bad := range []string{"https://witness.example", "ftp://witness.example=" + key, "https://u:p@witness.example=" + key,
		"https://witness.example/?q=1=" + key, "https://witness.example=" + logKey} {
		if _, err := translog.ParseWitness(bad); err == nil || !strings.Contains(err.Error(), "--witness") {
			t.Errorf("%q: %v; want a refusal naming --witness", bad, err)
		}
	}
}
