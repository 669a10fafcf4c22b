// Package sqlstore is DotLab's storage: one SQL text for SQLite
// (modernc.org/sqlite, pure Go, the default) and PostgreSQL (jackc/pgx/v5,
// for several server processes sharing one database). It implements the
// protocol's persistence (package store: conditional writes that report
// whether they applied, the log append inside the same transaction, and
// the reads), for the protocol service (package protocol) to run the steps
// on; the steps not moved to the service yet (the draw, accepting,
// declining, logs, lab rooms, listing, registration, settling) are still
// methods here, so that both engines give the same answers.
//
// Both engines bind parameters as $1, $2, …; times are stored as Unix
// milliseconds (UTC); schema migrations are embedded and applied at Open with
// pressly/goose.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/bytecache"
	"github.com/dotlab/dotlab/translog"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Dialect names the storage engine.
type Dialect string

// The two engines.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Options configure a DB.
type Options struct {
	Clock   dotlab.Clock   // time source; default dotlab.SystemClock
	Windows dotlab.Windows // protocol windows; default dotlab.DefaultWindows
	// LogOrigin is the transparency log's origin, fixed at the first start
	// (translog.Options.Origin; empty: as stored, or a random one).
	LogOrigin string
	// NoLog switches the transparency log off: records are written without
	// entries (benchmarks compare the two; a server always logs).
	NoLog bool
	// NotifyInTx (PostgreSQL) sends announcements with pg_notify inside
	// each write transaction instead of through the outbox (outbox.go):
	// the path before the outbox, kept for benchmarks to compare (its
	// notifying commits happen one at a time). A server never sets it.
	NotifyInTx bool
	// AwaitLog makes every write that logged wait after its commit (at
	// most 2 s) for the batch that integrates its entries, so that its
	// answer comes after its entry is in the checkpoint: the path before
	// writes answered at their commit (docs/verification.md §2
	// "Sequencing"), kept for benchmarks to compare. A server never sets it.
	AwaitLog bool
	// UniqueNames refuses a new agent whose name has the confusables
	// skeleton of an existing agent's (NameSkeleton; 409 duplicate), and
	// gives agents registered without one theirs at Open. `dotlab serve`
	// sets it (--unique-names, on by default).
	UniqueNames bool
}

// DB is an open store. It is safe for concurrent use.
type DB struct {
	dialect Dialect
	// w takes writes; r takes reads. For SQLite w has a single connection
	// (SQLite has one writer at a time, and queueing in Go is cheaper than
	// busy-waiting), r several read-only ones (WAL readers never block). For
	// PostgreSQL both are the same pool.
	w, r    *sql.DB
	clock   dotlab.Clock
	windows dotlab.Windows

	mu        sync.Mutex
	manifests *bytecache.Cache[*dotlab.Manifest] // parsed manifests by hash (immutable)
	auth      map[string]authEntry               // key hash → agent, for authTTL

	findClaimStmt *sql.Stmt // prepared on the read pool

	log   *translog.Log // nil when Options.NoLog
	logTx sync.Map      // *sql.Tx → true: the transaction appended to the log

	uniqueNames bool // Options.UniqueNames
	inTxNotify  bool // Options.NotifyInTx
	awaitsLog   bool // Options.AwaitLog

	schema schemaCheck // SchemaVersion's goose provider (ready.go)
	notes  *announcer  // subscribers and pending announcements (notify.go)
	relay  *outbox     // PostgreSQL: the outbox's relay (outbox.go); nil on SQLite
}

// Open opens the database named by dbURL — "sqlite:PATH" (e.g.
// "sqlite:dotlab.db") or "postgres://user@host:port/db?…" — and applies
// pending migrations. It returns an error naming the URL form when dbURL has
// neither prefix.
func Open(ctx context.Context, dbURL string, opt Options) (*DB, error) {
	if opt.Clock == nil {
		opt.Clock = dotlab.SystemClock{}
	}
	if opt.Windows == (dotlab.Windows{}) {
		opt.Windows = dotlab.DefaultWindows
	}
	db := &DB{clock: opt.Clock, windows: opt.Windows, manifests: bytecache.New[*dotlab.Manifest](maxCachedManifestBytes), auth: map[string]authEntry{}, notes: newAnnouncer(),
		uniqueNames: opt.UniqueNames, inTxNotify: opt.NotifyInTx, awaitsLog: opt.AwaitLog}
	var err error
	switch {
	case strings.HasPrefix(dbURL, "sqlite:"):
		db.dialect = SQLite
		err = db.openSQLite(strings.TrimPrefix(dbURL, "sqlite:"))
	case strings.HasPrefix(dbURL, "postgres://"), strings.HasPrefix(dbURL, "postgresql://"):
		db.dialect = Postgres
		err = db.openPostgres(dbURL)
	default:
		return nil, fmt.Errorf("database URL %q: use sqlite:PATH (e.g. sqlite:dotlab.db) or postgres://user@host:5432/dbname", dbURL)
	}
	if err != nil {
		return nil, err
	}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if db.dialect == Postgres {
		db.relay = startOutbox(db.w, db.notes.channel)
	}
	if db.uniqueNames {
		if err := db.backfillNameSkeletons(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := db.openLog(ctx, opt); err != nil {
		db.Close()
		return nil, err
	}
	// The hottest read (GET /claims/{id}, every protocol step) is prepared
	// once: parsing its SQL was the largest single cost of a read.
	if db.findClaimStmt, err = db.r.PrepareContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE id = $1`); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// SQLiteWriterDSN is the modernc.org/sqlite data source name of the store's
// writer connection for a database file: WAL, synchronous NORMAL, foreign
// keys, a 10 s busy timeout and BEGIN IMMEDIATE transactions. Use it with
// one open connection.
func SQLiteWriterDSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

func (db *DB) openSQLite(path string) error {
	if path == "" {
		return errors.New("database URL sqlite: needs a file path, e.g. sqlite:dotlab.db")
	}
	// Both pools keep each connection's parsed statements (stmtcache.go).
	w := openSQLiteDB(SQLiteWriterDSN(path))
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	// The writer creates the file and switches it to WAL before readers open.
	if err := w.Ping(); err != nil {
		w.Close()
		return fmt.Errorf("open %s: %w", path, err)
	}
	qr := url.Values{}
	qr.Add("_pragma", "busy_timeout(10000)")
	qr.Add("_pragma", "query_only(1)")
	r := openSQLiteDB("file:" + path + "?" + qr.Encode())
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	db.w, db.r = w, r
	return nil
}

// DefaultPoolSize is the PostgreSQL connections one store opens at most
// unless its URL says otherwise (PoolSize).
const DefaultPoolSize = 32

// PoolSize reads pool_max_conns (1-1000; the name pgxpool gives it) from
// a PostgreSQL URL, DefaultPoolSize when absent, and returns the URL
// without it: pgx would send an unknown parameter to the server as a
// runtime setting, which the server refuses. Several server processes on
// one PostgreSQL share its max_connections (100 by default): three at 32
// leave it 4.
func PoolSize(dsn string) (string, int, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", 0, fmt.Errorf("database URL: not a URL: %w", err)
	}
	q := u.Query()
	v, ok := q["pool_max_conns"]
	if !ok {
		return dsn, DefaultPoolSize, nil
	}
	n, err := strconv.Atoi(v[len(v)-1])
	if err != nil || n < 1 || n > 1000 {
		return "", 0, fmt.Errorf("database URL: pool_max_conns=%q: give a whole number of connections from 1 to 1000 (default %d)", v[len(v)-1], DefaultPoolSize)
	}
	q.Del("pool_max_conns")
	u.RawQuery = q.Encode()
	return u.String(), n, nil
}

func (db *DB) openPostgres(dsn string) error {
	dsn, size, err := PoolSize(dsn)
	if err != nil {
		return err
	}
	p, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	p.SetMaxOpenConns(size)
	p.SetMaxIdleConns(size)
	p.SetConnMaxIdleTime(5 * time.Minute)
	if err := p.Ping(); err != nil {
		p.Close()
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	db.w, db.r = p, p
	var schema sql.NullString
	if err := p.QueryRow(`SELECT current_schema()`).Scan(&schema); err != nil {
		p.Close()
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if !schema.Valid {
		p.Close()
		return errors.New("connect to PostgreSQL: no schema of the URL's search_path exists: create it first (psql: CREATE SCHEMA name) or leave search_path out (docs/deploy.md)")
	}
	db.notes.dsn, db.notes.channel = dsn, channelFor(schema.String)
	return nil
}

func (db *DB) migrate(ctx context.Context) error {
	var opts []goose.ProviderOption
	if db.dialect == Postgres {
		// Several server processes may start at once on one database.
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := db.gooseProvider(db.w, opts...)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// Dialect reports the engine.
func (db *DB) Dialect() Dialect { return db.dialect }

// Close closes the database (after in-flight queries finish).
func (db *DB) Close() error {
	var errs []error
	db.notes.close()
	db.relay.close()
	if db.log != nil {
		errs = append(errs, db.log.Close())
	}
	if db.findClaimStmt != nil {
		errs = append(errs, db.findClaimStmt.Close())
	}
	if db.r != nil && db.r != db.w {
		errs = append(errs, db.r.Close())
	}
	if db.w != nil {
		errs = append(errs, db.w.Close())
	}
	return errors.Join(errs...)
}

// Ping checks the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.w.PingContext(ctx) }

func (db *DB) now() time.Time { return db.clock.Now() }

// Now is the store's clock (store.Reader).
func (db *DB) Now() time.Time { return db.clock.Now() }

// Windows are the windows and quorum the store runs with (store.Reader).
func (db *DB) Windows() dotlab.Windows { return db.windows }

// tx runs fn in a write transaction and commits it, or rolls back on error
// (so no half-written record is ever left). For SQLite the transaction takes
// the write lock at BEGIN (_txlock=immediate). The changes fn announced
// (db.announce) are written into the outbox before the commit (PostgreSQL),
// delivered to this process's subscribers after it, and relayed to the
// other processes by the outbox's relay, which the commit pokes (outbox.go); a rolled-back transaction announces nothing (notify.go). A
// transaction that logged wakes the log's sequencer after its commit and
// answers without waiting for its batch (committedLog).
func (db *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	err = fn(tx)
	changes := db.notes.takePending(tx)
	if err == nil {
		err = db.notifyInTx(ctx, tx, changes)
	}
	if err != nil {
		db.logTx.Delete(tx)
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		db.logTx.Delete(tx)
		return err
	}
	if len(changes) > 0 {
		db.relay.kick()
	}
	db.notes.deliver(changes...)
	db.committedLog(ctx, tx)
	return nil
}

// newID is dotlab.NewID.
func newID(prefix string) string { return dotlab.NewID(prefix) }

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func fromNullMS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMS(v.Int64)
	return &t
}

// isUniqueViolation reports whether err is a unique-constraint failure on
// either engine.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}
