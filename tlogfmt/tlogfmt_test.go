package tlogfmt_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/tlogfmt"
)

func TestTilePaths(t *testing.T) {
	for _, c := range []struct {
		tile tlogfmt.Tile
		path string
	}{
		{tlogfmt.Tile{Level: 0, N: 0, W: 256}, "tile/0/000"},
		{tlogfmt.Tile{Level: 1, N: 1234067, W: 256}, "tile/1/x001/x234/067"},
		{tlogfmt.Tile{Level: 0, N: 1234067, W: 8}, "tile/0/x001/x234/067.p/8"},
		{tlogfmt.Tile{Level: tlogfmt.EntriesLevel, N: 1000, W: 255}, "tile/entries/x001/000.p/255"},
	} {
		if got := c.tile.Path(); got != c.path {
			t.Errorf("%+v: path %s, want %s", c.tile, got, c.path)
		}
		back, err := tlogfmt.ParseTilePath(c.path)
		if err != nil || back != c.tile {
			t.Errorf("parse %s: %+v %v", c.path, back, err)
		}
	}
	for _, bad := range []string{"tile/00/000", "tile/0/1", "tile/0/x001", "tile/0/001/002", "tile/64/000", "tile/0/000.p/256",
		"tile/0/000.p/0", "tile/0/000.p/08", "tile/entries/x000/001", "tile/data/000", "checkpoint", "tile/0/-01"} {
		if _, err := tlogfmt.ParseTilePath(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestCheckpointText(t *testing.T) {
	cp := tlogfmt.Checkpoint{Origin: "example.com/log", Size: 20852163, Root: [32]byte{1, 2, 3}}
	back, err := tlogfmt.ParseCheckpoint(cp.Text())
	if err != nil || back != cp {
		t.Fatalf("%+v %v", back, err)
	}
	for _, bad := range []string{"example.com/log\n012\nAQID\n", "example.com/log\n5\nnot base64\n", "\n5\nAAAA\n", "example.com/log\n5\n"} {
		if _, err := tlogfmt.ParseCheckpoint(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestEntryCanonicalAndExact(t *testing.T) {
	seed := int64(9007199254740993) // not a double
	run := &dotlab.Run{ID: "r_1", ClaimID: "DL-0001", RunnerID: "ag_r", Outcome: dotlab.OutcomeReproduced,
		Comparisons: []dotlab.Comparison{{Name: "t", Published: "4.0621234567000001", Rerun: "4.0621234567", Match: true}},
		Body:        dotlab.RunBody{Environment: dotlab.RunEnvironment{Seed: &seed}, Notes: "n"},
		PublishedAt: time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)}
	data, err := tlogfmt.RunEntry(run).Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"published":"4.0621234567000001"`, `"seed":"9007199254740993"`, `"published_at":"2026-01-02T03:04:05.123Z"`, `{"claim_id":"DL-0001","id":"r_1","record":{`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("entry lacks %s: %s", want, data)
		}
	}
	l, err := tlogfmt.Decode(data)
	if err != nil || l.Key() != (tlogfmt.Key{Type: tlogfmt.TypeRun, ID: "r_1"}) {
		t.Fatalf("decode: %+v %v", l, err)
	}
	if _, err := tlogfmt.Decode([]byte(`{"type":"run","v":1,"claim_id":"DL-0001","id":"r_1","record":{}}`)); err == nil {
		t.Error("non-canonical entry decoded")
	}
	if _, err := tlogfmt.Decode([]byte(`{"claim_id":"DL-0001","id":"r_1","record":{},"type":"run","v":2}`)); err == nil {
		t.Error("unknown version decoded")
	}
	big := tlogfmt.Entry{Type: tlogfmt.TypeClaim, ClaimID: "DL-0001", ID: "DL-0001", Record: tlogfmt.ClaimRecord{Title: strings.Repeat("x", 70000)}}
	if _, err := big.Encode(); err == nil {
		t.Error("an entry over 65535 bytes encoded")
	}
}

func TestBundle(t *testing.T) {
	var b []byte
	for _, e := range []string{"a", "", strings.Repeat("z", 300)} {
		b = tlogfmt.AppendBundleEntry(b, []byte(e))
	}
	es, err := tlogfmt.SplitBundle(b)
	if err != nil || len(es) != 3 || len(es[2]) != 300 || len(es[1]) != 0 {
		t.Fatalf("%d entries, %v", len(es), err)
	}
	if _, err := tlogfmt.SplitBundle(b[:len(b)-1]); err == nil {
		t.Fatal("truncated bundle split")
	}
}

func TestMessageDigestCoversBody(t *testing.T) {
	m := &dotlab.LabMessage{ID: "m1", ClaimID: "DL-0001", Seq: 1, AgentID: "ag_a", Type: "note", To: "all", Body: "hello"}
	d := tlogfmt.MessageDigest(m)
	m.Body = "hello!"
	if tlogfmt.MessageDigest(m) == d {
		t.Fatal("digest ignores the body")
	}
}
