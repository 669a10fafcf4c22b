package sqlstore

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	sqlite "modernc.org/sqlite"
)

// TestStatementCacheMemoryOfBatchInserts: the log's batch insert
// (translog insertEntries) is one text per batch size (1-2,048 rows of 6
// parameters), so a writer connection keeps up to stmtCacheSize of them.
// What they hold (SQLITE_DBSTATUS_STMT_USED) after batches of every size
// from 1 to 256 rows and four of ~2,048 is bounded: long texts are not
// kept (maxCachedQuery): 6.2 MiB, against 24.1 MiB before that bound (a
// 2,048-row one holds 1.57 MiB: 400 MiB for 256 batch sizes that large).
func TestStatementCacheMemoryOfBatchInserts(t *testing.T) {
	ctx := context.Background()
	db := openSQLiteDB(SQLiteWriterDSN(filepath.Join(t.TempDir(), "mem.db")))
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE e (idx INTEGER PRIMARY KEY, type TEXT, claim_id TEXT, record_id TEXT, body BLOB, hashes BLOB)`); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	used := func() int {
		var cur int
		conn.Raw(func(dc any) error {
			cur, _, err = dc.(*cachingConn).c.(sqlite.DBStatus).Status(sqlite.DBStatusStmtUsed, false)
			return err
		})
		return cur
	}
	before := used()
	next := 0
	sizes := []int{2048, 2047, 2046, 2045}
	for n := 1; n <= 256; n++ {
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		var sb strings.Builder
		sb.WriteString(`INSERT INTO e (idx, type, claim_id, record_id, body, hashes) VALUES `)
		args := make([]any, 0, 6*n)
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteByte('(')
			for j := 1; j <= 6; j++ {
				if j > 1 {
					sb.WriteByte(',')
				}
				sb.WriteString("$" + strconv.Itoa(len(args)+j))
			}
			sb.WriteByte(')')
			args = append(args, next, "t", "c", "r", []byte("b"), []byte("h"))
			next++
		}
		if _, err := conn.ExecContext(ctx, sb.String(), args...); err != nil {
			t.Fatal(err)
		}
	}
	kept := used() - before
	t.Logf("after %d distinct batch inserts the writer connection keeps %.2f MiB of statements", len(sizes), float64(kept)/(1<<20))
	if kept > 16<<20 {
		t.Fatalf("the writer connection keeps %.1f MiB of prepared batch inserts", float64(kept)/(1<<20))
	}
}
