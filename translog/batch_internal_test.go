package translog

import (
	"context"
	"database/sql"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// TestBatchSetsIdleTimeout: a batch's transaction on PostgreSQL bounds how
// long its session may sit idle holding log_head (BatchIdleTimeout).
func TestBatchSetsIdleTimeout(t *testing.T) {
	url := os.Getenv("DOTLAB_TEST_POSTGRES")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable" // as sqlstoretest.PostgresURL
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ping(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs PostgreSQL: %v", err)
		}
		t.Skipf("needs PostgreSQL: %v", err)
	}
	l := &Log{w: db, dialect: Postgres}
	tx, err := l.beginBatch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var got string
	if err := tx.QueryRow(`SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "5s" {
		t.Fatalf("a batch's idle_in_transaction_session_timeout is %q, want 5s (BatchIdleTimeout)", got)
	}
}
