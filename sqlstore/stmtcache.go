package sqlstore

import (
	"container/list"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"

	sqlite "modernc.org/sqlite"
)

// SQLite's prepared statements, kept per connection.
//
// database/sql hands a query to a driver connection that executes text
// directly (modernc's conn does), and modernc then parses the SQL on every
// call: a quarter of the API's CPU on the write path was SQLite's parser
// (bench/README.md, issue 25). pgx keeps a statement cache of its own;
// modernc has none. A cachingConn hides modernc's direct execution, so
// database/sql prepares each query, and answers Prepare from a per-
// connection cache of parsed statements keyed by their text (modernc
// resets a kept statement between uses instead of finalizing it). A
// statement in use (a Rows still open, or a *sql.Stmt holding it) is not
// handed out twice: the second use gets a statement of its own, finalized
// when done. At most stmtCacheSize statements are kept per connection,
// the least recently used finalized first, and none of a text longer than
// maxCachedQuery.

// stmtCacheSize bounds the statements one SQLite connection keeps.
const stmtCacheSize = 256

// maxCachedQuery is the longest text (bytes) whose statement is kept. The
// store's own texts are at most ~2 KiB; longer ones are built per call
// (the log's batch insert, translog insertEntries: one text per batch
// size, 6 parameters a row), and a kept one holds about 1.6 MiB of SQLite
// memory at 2,048 rows: 256 of them kept 400 MiB on the writer
// (TestStatementCacheMemoryOfBatchInserts). Their parse is a small part of
// their cost anyway.
const maxCachedQuery = 4096

// openSQLiteDB opens a database/sql pool on dsn (a modernc.org/sqlite
// data source name) whose connections cache their prepared statements.
func openSQLiteDB(dsn string) *sql.DB {
	return sql.OpenDB(sqliteConnector{dsn: dsn})
}

type sqliteConnector struct{ dsn string }

func (c sqliteConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := (&sqlite.Driver{}).Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return newCachingConn(conn)
}

func (c sqliteConnector) Driver() driver.Driver { return &sqlite.Driver{} }

// sqliteConn is what modernc's connection offers besides driver.Conn.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachingConn is one SQLite connection with its statement cache.
type cachingConn struct {
	c       sqliteConn
	mu      sync.Mutex
	byQuery map[string]*list.Element // of *cachedStmt
	lru     list.List                // front: most recently used
}

func newCachingConn(c driver.Conn) (*cachingConn, error) {
	sc, ok := c.(sqliteConn)
	if !ok {
		c.Close()
		return nil, errors.New("sqlstore: the SQLite driver's connection lacks BeginTx, PrepareContext, Ping, ResetSession or IsValid")
	}
	return &cachingConn{c: sc, byQuery: map[string]*list.Element{}}, nil
}

// cachedStmt is a kept statement; Close returns it to the cache.
type cachedStmt struct {
	driver.Stmt
	conn  *cachingConn
	query string
	inUse bool
}

func (s *cachedStmt) Close() error {
	s.conn.mu.Lock()
	defer s.conn.mu.Unlock()
	s.inUse = false
	return nil
}

func (s *cachedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *cachedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

func (c *cachingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext returns the kept statement of query when it is free, or
// prepares one (kept when query has none yet and is at most
// maxCachedQuery bytes).
func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if len(query) > maxCachedQuery {
		return c.c.PrepareContext(ctx, query) // one of its own, finalized when done
	}
	c.mu.Lock()
	if e, ok := c.byQuery[query]; ok {
		s := e.Value.(*cachedStmt)
		if !s.inUse {
			s.inUse = true
			c.lru.MoveToFront(e)
			c.mu.Unlock()
			return s, nil
		}
		c.mu.Unlock()
		return c.c.PrepareContext(ctx, query) // in use: one of its own
	}
	c.mu.Unlock()
	st, err := c.c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if _, ok := st.(driver.StmtExecContext); !ok {
		return st, nil
	}
	if _, ok := st.(driver.StmtQueryContext); !ok {
		return st, nil
	}
	s := &cachedStmt{Stmt: st, conn: c, query: query, inUse: true}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byQuery[query] = c.lru.PushFront(s)
	c.evict()
	return s, nil
}

// evict finalizes the least recently used free statements beyond
// stmtCacheSize (c.mu held).
func (c *cachingConn) evict() {
	for e := c.lru.Back(); e != nil && c.lru.Len() > stmtCacheSize; {
		prev := e.Prev()
		if s := e.Value.(*cachedStmt); !s.inUse {
			c.lru.Remove(e)
			delete(c.byQuery, s.query)
			s.Stmt.Close()
		}
		e = prev
	}
}

// Close finalizes every kept statement and closes the connection
// (database/sql closes a connection's statements before it).
func (c *cachingConn) Close() error {
	c.mu.Lock()
	for e := c.lru.Front(); e != nil; e = e.Next() {
		e.Value.(*cachedStmt).Stmt.Close()
	}
	c.lru.Init()
	clear(c.byQuery)
	c.mu.Unlock()
	return c.c.Close()
}

// Begin is driver.Conn's; database/sql calls BeginTx.
func (c *cachingConn) Begin() (driver.Tx, error) {
	return c.c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.c.BeginTx(ctx, opts)
}

func (c *cachingConn) Ping(ctx context.Context) error { return c.c.Ping(ctx) }

func (c *cachingConn) ResetSession(ctx context.Context) error { return c.c.ResetSession(ctx) }

func (c *cachingConn) IsValid() bool { return c.c.IsValid() }
