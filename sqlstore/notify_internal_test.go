package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/dotlab/dotlab"
)

// TestRolledBackAnnouncesNothing: a transaction that fails after
// announcing a claim delivers nothing; one that commits delivers its
// changes once each, a claim announced as room and claim as a claim change.
func TestRolledBackAnnouncesNothing(t *testing.T) {
	db, err := Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "a.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got []dotlab.Change
	db.Subscribe(func(ch dotlab.Change) { got = append(got, ch) })
	boom := errors.New("boom")
	err = db.tx(context.Background(), func(tx *sql.Tx) error {
		db.announceClaim(tx, "DL-0001")
		return boom
	})
	if !errors.Is(err, boom) || len(got) != 0 || len(db.notes.pending) != 0 {
		t.Fatalf("rolled back: err %v, delivered %v, pending %d", err, got, len(db.notes.pending))
	}
	err = db.tx(context.Background(), func(tx *sql.Tx) error {
		db.announce(tx, dotlab.Change{ClaimID: "DL-0002", Room: true})
		db.announceClaim(tx, "DL-0002")
		db.announce(tx, dotlab.Change{ClaimID: "DL-0003", Room: true})
		return nil
	})
	want := []dotlab.Change{{ClaimID: "DL-0002"}, {ClaimID: "DL-0003", Room: true}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("committed: err %v, delivered %v, want %v", err, got, want)
	}
}

func TestPayloads(t *testing.T) {
	for _, ch := range []dotlab.Change{{ClaimID: "DL-0001"}, {ClaimID: "DL-123456", Room: true, MessageSeq: 57}} {
		if back := parsePayload(payload(ch)); back != ch {
			t.Errorf("%+v → %q → %+v", ch, payload(ch), back)
		}
	}
	for _, s := range []string{"", "c:", "x:DL-0001", "c:DL-1", "DL-0001", "c:DL-0001 ", "r:DL-0001", "r:DL-0001:x", "r:DL-0001:-1"} {
		if ch := parsePayload(s); !ch.Resync() {
			t.Errorf("%q parsed as %+v, want a resync", s, ch)
		}
	}
}
