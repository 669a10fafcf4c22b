package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// TestStatementCache: on a real SQLite file, a query's parsed statement
// is kept and reused; the same text run again while its rows are still
// open gets a statement of its own (both read correctly); a connection
// keeps at most stmtCacheSize statements; scripts and errors still work.
func TestStatementCache(t *testing.T) {
	ctx := context.Background()
	db := openSQLiteDB(SQLiteWriterDSN(filepath.Join(t.TempDir(), "cache.db")))
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT); CREATE TABLE u (k INTEGER)`); err != nil {
		t.Fatal(err) // a script of two statements
	}
	for i := range 5 {
		if _, err := db.ExecContext(ctx, `INSERT INTO t (k, v) VALUES ($1, $2)`, i, fmt.Sprint("v", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO t (k, v) VALUES ($1, $2)`, 1, "dup"); err == nil {
		t.Fatal("a duplicate key was inserted")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const q = `SELECT k, v FROM t WHERE k >= $1 ORDER BY k`
	outer, err := tx.QueryContext(ctx, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for outer.Next() {
		var k int
		var v string
		if err := outer.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		// The same text while outer's statement is open.
		var inner string
		if err := tx.QueryRowContext(ctx, q, k).Scan(new(int), &inner); err != nil || inner != v {
			t.Fatalf("inner query at %d: %q, %v; want %q", k, inner, err, v)
		}
		n++
	}
	if err := outer.Close(); err != nil || n != 5 {
		t.Fatalf("outer read %d rows (%v), want 5", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var cache *cachingConn
	if err := conn.Raw(func(dc any) error { cache = dc.(*cachingConn); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, kept := cache.byQuery[q]; !kept {
		t.Fatal("the query's statement was not kept")
	}
	for i := range stmtCacheSize + 40 {
		var one int
		if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT %d", i)).Scan(&one); err != nil || one != i {
			t.Fatalf("SELECT %d: %d, %v", i, one, err)
		}
	}
	if got := cache.lru.Len(); got != stmtCacheSize || len(cache.byQuery) != stmtCacheSize {
		t.Fatalf("%d statements kept (%d by text), want %d", got, len(cache.byQuery), stmtCacheSize)
	}
}
