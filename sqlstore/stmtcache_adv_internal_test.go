package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestStatementCacheUnderAttack: the kept statements survive what a pool
// does to them: a query cancelled mid-step then run again on the same
// connection, a constraint violation then the same text again in one
// transaction, a schema change (a column added, a table dropped and made
// again) after readers kept statements on it, a Rows left open while the
// same text is executed, a *sql.Stmt of the pool used inside a
// transaction, many readers at once, and a *sql.Stmt closed after its
// pool.
func TestStatementCacheUnderAttack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "adv.db")
	w := openSQLiteDB(SQLiteWriterDSN(path))
	defer w.Close()
	w.SetMaxOpenConns(1)
	if _, err := w.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if _, err := w.ExecContext(ctx, `INSERT INTO t (k, v) VALUES ($1, $2)`, i, fmt.Sprint("v", i)); err != nil {
			t.Fatal(err)
		}
	}
	r := openSQLiteDB("file:" + path + "?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	defer r.Close()
	r.SetMaxOpenConns(1) // every query on the same connection
	const heavy = `SELECT count(*) FROM t a, t b WHERE a.v < b.v`
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	var n int
	err := r.QueryRowContext(cctx, heavy).Scan(&n)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) && err == nil {
		t.Logf("the heavy query finished before its deadline (%d)", n)
	}
	for range 3 { // the cancelled statement, and its connection, again
		if err := r.QueryRowContext(ctx, `SELECT count(*) FROM t WHERE k < $1`, 10).Scan(&n); err != nil || n != 10 {
			t.Fatalf("after a cancelled query: %d, %v", n, err)
		}
	}
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	if err := r.QueryRowContext(sctx, `SELECT count(*) FROM t a, t b WHERE a.k < 100 AND b.k < 100 AND a.v < b.v`).Scan(&n); err != nil || n != 4950 {
		t.Fatalf("a smaller run of the same kind: %d, %v", n, err)
	}
	scancel()

	st, err := w.PrepareContext(ctx, `SELECT v FROM t WHERE k = $1`)
	if err != nil {
		t.Fatal(err)
	}
	// A constraint violation, then the same text in the same transaction.
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	const ins = `INSERT INTO t (k, v) VALUES ($1, $2)`
	if _, err := tx.ExecContext(ctx, ins, 1, "dup"); err == nil {
		t.Fatal("duplicate inserted")
	}
	if _, err := tx.ExecContext(ctx, ins, 5000, "new"); err != nil {
		t.Fatalf("after a violation: %v", err)
	}
	// A Rows left open while the same text is executed, and the write it
	// reads.
	const sel = `SELECT k FROM t WHERE k >= $1 ORDER BY k`
	open, err := tx.QueryContext(ctx, sel, 4999)
	if err != nil {
		t.Fatal(err)
	}
	if !open.Next() {
		t.Fatal("no row")
	}
	var k int
	if err := tx.QueryRowContext(ctx, sel, 5000).Scan(&k); err != nil || k != 5000 {
		t.Fatalf("the same text while its rows are open: %d, %v", k, err)
	}
	open.Scan(&k)
	if k != 5000 || open.Next() {
		t.Fatalf("the open rows: %d", k)
	}
	open.Close()
	// A *sql.Stmt of the pool inside the transaction, twice.
	var v string
	for _, want := range []string{"new", "v3"} {
		key := map[string]int{"new": 5000, "v3": 3}[want]
		if err := tx.StmtContext(ctx, st).QueryRowContext(ctx, key).Scan(&v); err != nil || v != want {
			t.Fatalf("pool statement in the transaction: %q, %v", v, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	// Readers keep statements on t; the schema changes under them.
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	const star = `SELECT * FROM t WHERE k = $1`
	readAll := func(want int) {
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					rows, err := r.QueryContext(ctx, star, (g*50+i)%2000)
					if err != nil {
						t.Error(err)
						return
					}
					cols, _ := rows.Columns()
					for rows.Next() {
					}
					if err := rows.Close(); err != nil || len(cols) != want {
						t.Errorf("columns %v (%v), want %d", cols, err, want)
					}
				}
			}()
		}
		wg.Wait()
	}
	readAll(2)
	if _, err := w.ExecContext(ctx, `ALTER TABLE t ADD COLUMN extra TEXT NOT NULL DEFAULT 'x'`); err != nil {
		t.Fatal(err)
	}
	readAll(3)
	if _, err := w.ExecContext(ctx, `DROP TABLE t; CREATE TABLE t (k INTEGER PRIMARY KEY, a TEXT, b TEXT, c TEXT)`); err != nil {
		t.Fatal(err)
	}
	if err := r.QueryRowContext(ctx, `SELECT count(*) FROM t WHERE k < $1`, 10).Scan(&n); err != nil || n != 0 {
		t.Fatalf("after the table was made again: %d, %v", n, err)
	}
	rows, err := r.QueryContext(ctx, star, 1)
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	rows.Close()
	if len(cols) != 4 {
		t.Fatalf("after the table was made again: columns %v", cols)
	}
	// A *sql.Stmt closed after its pool.
	st2, err := r.PrepareContext(ctx, star)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := st2.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		t.Fatalf("a statement closed after its pool: %v", err)
	}
}
