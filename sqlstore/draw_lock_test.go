package sqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/sqlstore"
)

// heldClaim is a PostgreSQL store with one funded claim, a runner to draw
// it, a collaborator, and a transaction of another connection left open
// (other) for the test to touch the claim in.
type heldClaim struct {
	svc            *protocol.Service
	claim          *dotlab.Claim
	runner, helper *dotlab.Agent
	other          *sql.Tx
}

func openHeldClaim(t *testing.T, title string) heldClaim {
	t.Helper()
	ctx := context.Background()
	url := sqlstoretest.URL(t, sqlstore.Postgres)
	db, err := sqlstore.Open(ctx, url, sqlstore.Options{Clock: sqlstoretest.NewClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h := heldClaim{svc: sqlstoretest.Protocol(db), runner: mustAgent(t, db, "runner"), helper: mustAgent(t, db, "collaborator")}
	if h.claim, err = h.svc.CreateClaim(ctx, mustAgent(t, db, "submitter").ID, sqlstoretest.NewClaim(t, title)); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	if h.other, err = raw.BeginTx(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.other.Rollback() })
	return h
}

// draw is the runner's NextJob, bounded at 5 s; it fails the test unless
// the claim is offered.
func (h heldClaim) draw(t *testing.T, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	j, found, err := h.svc.NextJob(ctx, h.runner)
	if err != nil || !found || j.ClaimID != h.claim.ID {
		t.Fatalf("draw %s: %+v, found %v, %v; want the claim offered", when, j, found, err)
	}
}

// TestDrawOffersAClaimAnotherTransactionReferences: on PostgreSQL, a
// transaction still open that inserts a row referencing a funded claim (a
// collaborator joining its room: roles' foreign key takes FOR KEY SHARE on
// the claim's row) does not hide the claim from the draw. The offer's
// UPDATE takes FOR NO KEY UPDATE, which a foreign key's lock does not
// conflict with; its SKIP LOCKED subselect must take the same lock, not FOR
// UPDATE, or an eligible runner is told there is no job (204) while the
// only claim is free.
func TestDrawOffersAClaimAnotherTransactionReferences(t *testing.T) {
	h := openHeldClaim(t, "a referenced claim")
	if _, err := h.other.Exec(`INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, 'collaborator', 0)`, h.claim.ID, h.helper.ID); err != nil {
		t.Fatal(err)
	}
	h.draw(t, "while another transaction references the only claim")
}

// TestDrawWaitsForAHeldFreeClaim: on PostgreSQL the draw skips a claim
// whose row another transaction holds (store.ErrClaimBusy) but, winning no
// other claim, comes back and waits for it: a room write that bumps the
// only funded claim's row for a moment does not make the draw answer "no
// job" (docs/mechanism.md §1 step 4).
func TestDrawWaitsForAHeldFreeClaim(t *testing.T) {
	h := openHeldClaim(t, "a claim held for a moment")
	if _, err := h.other.Exec(`UPDATE claims SET msg_seq = msg_seq WHERE id = $1`, h.claim.ID); err != nil {
		t.Fatal(err)
	}
	held := 300 * time.Millisecond
	go func() {
		time.Sleep(held)
		h.other.Commit()
	}()
	t0 := time.Now()
	h.draw(t, "while the only claim's row is held")
	if waited := time.Since(t0); waited < held/2 {
		t.Fatalf("offered after %s, before the holder released the row (%s)", waited, held)
	}
}
