package sqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestDrawOffersAClaimAnotherTransactionReferences: on PostgreSQL, a
// transaction still open that inserts a row referencing a funded claim (a
// collaborator joining its room: roles' foreign key takes FOR KEY SHARE on
// the claim's row) does not hide the claim from the draw. The offer's
// UPDATE takes FOR NO KEY UPDATE, which a foreign key's lock does not
// conflict with; its SKIP LOCKED subselect must take the same lock, not FOR
// UPDATE, or an eligible runner is told there is no job (204) while the
// only claim is free.
func TestDrawOffersAClaimAnotherTransactionReferences(t *testing.T) {
	ctx := context.Background()
	url := sqlstoretest.URL(t, sqlstore.Postgres)
	db, err := sqlstore.Open(ctx, url, sqlstore.Options{Clock: sqlstoretest.NewClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc := sqlstoretest.Protocol(db)
	sub, helper, runner := mustAgent(t, db, "submitter"), mustAgent(t, db, "collaborator"), mustAgent(t, db, "runner")
	c, err := svc.CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, "a referenced claim"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	other, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if _, err := other.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, 'collaborator', 0)`, c.ID, helper.ID); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	j, found, err := svc.NextJob(dctx, runner)
	if err != nil || !found || j.ClaimID != c.ID {
		t.Fatalf("draw while another transaction references the only claim: %+v, found %v, %v; want the claim offered", j, found, err)
	}
}

// TestDrawWaitsForAHeldFreeClaim: on PostgreSQL the draw skips a claim
// whose row another transaction holds (store.ErrClaimBusy) but, winning no
// other claim, comes back and waits for it: a room write that bumps the
// only funded claim's row for a moment does not make the draw answer "no
// job" (docs/mechanism.md §1 step 4).
func TestDrawWaitsForAHeldFreeClaim(t *testing.T) {
	ctx := context.Background()
	url := sqlstoretest.URL(t, sqlstore.Postgres)
	db, err := sqlstore.Open(ctx, url, sqlstore.Options{Clock: sqlstoretest.NewClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc := sqlstoretest.Protocol(db)
	sub, runner := mustAgent(t, db, "submitter"), mustAgent(t, db, "runner")
	c, err := svc.CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, "a claim held for a moment"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	other, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if _, err := other.ExecContext(ctx, `UPDATE claims SET msg_seq = msg_seq WHERE id = $1`, c.ID); err != nil {
		t.Fatal(err)
	}
	held := 300 * time.Millisecond
	go func() {
		time.Sleep(held)
		other.Commit()
	}()
	t0 := time.Now()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	j, found, err := svc.NextJob(dctx, runner)
	if err != nil || !found || j.ClaimID != c.ID {
		t.Fatalf("draw while the only claim's row is held: %+v, found %v, %v; want the claim offered once it is released", j, found, err)
	}
	if waited := time.Since(t0); waited < held/2 {
		t.Fatalf("offered after %s, before the holder released the row (%s)", waited, held)
	}
}
