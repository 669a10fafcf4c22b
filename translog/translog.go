// Package translog is DotLab's transparency log (docs/verification.md): an
// append-only RFC 6962 Merkle tree of every protocol record, kept in the
// store's own database so that a record and its entry are written in one
// transaction, on SQLite and on PostgreSQL shared by several server
// processes. It serves the tree in the C2SP formats — c2sp.org/tlog-tiles
// tiles and entry bundles, c2sp.org/tlog-checkpoint checkpoints signed as
// c2sp.org/signed-note with the log's Ed25519 key — and computes inclusion
// and consistency proofs.
//
// The tree arithmetic (stored hashes, tiles, proofs) is
// golang.org/x/mod/sumdb/tlog's and the note signing
// golang.org/x/mod/sumdb/note's. Sequencing is the store's, in Tessera's
// model: Append writes the entry pending in the caller's *sql.Tx (no row
// shared between writers), and one sequencer at a time across every
// process on the database integrates the committed pending entries in
// batches, each in one transaction: indexes, entries with their stored
// hashes, the head and its signed checkpoint (sequencer.go, integrate.go).
package translog

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/base32"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/dotlab/dotlab/internal/bytecache"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"golang.org/x/mod/sumdb/note"
)

//go:embed migrations/*.sql
var migrations embed.FS

// The engines, spelled as sqlstore.Dialect spells them.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Options configure a Log.
type Options struct {
	// Origin is the checkpoint origin and key name, e.g.
	// "dotlab.example.org/log" (no spaces, no '+'). It is fixed when the
	// log's key is made at the first start; empty then means
	// "dotlab.log/<8 random characters>", empty later means "as stored".
	Origin string
	// Tick is how often the sequencer looks for entries left pending by
	// another process (default DefaultTick); an append in this process
	// wakes it at once (Await).
	Tick time.Duration
	// MaxBatch bounds the entries one batch integrates (default
	// DefaultMaxBatch).
	MaxBatch int
	// Manual runs no sequencer goroutine: entries stay pending until Sync
	// (or Await, which then integrates in the caller). For benchmarks that
	// fill a backlog and for tests.
	Manual bool
}

// Log is the transparency log on one database. It is safe for concurrent
// use, also by several processes sharing a PostgreSQL database.
type Log struct {
	w, r     *sql.DB // w: migrations, the key, batches; r: reads (may be w)
	dialect  string
	signer   note.Signer
	verifier note.Verifier
	vkey     string

	mu       sync.Mutex
	latest   signedCheckpoint // the last checkpoint signed by this process
	lastEdge frontier         // the right edge of the tree this process's last batch made

	tiles *bytecache.Cache[[]byte] // full tiles and bundles by path (immutable)

	insertPending *sql.Stmt // Append's statement, prepared on w

	seq      *sequencer
	manual   bool
	tick     time.Duration
	maxBatch int

	connMu sync.Mutex
	conn   *sql.Conn // PostgreSQL: the batches' own connection (beginBatch)

	statsMu sync.Mutex
	stats   Stats
}

type signedCheckpoint struct {
	cp   tlogfmt.Checkpoint
	note []byte
}

// maxCachedTileBytes bounds the cache of full tiles and bundles.
const maxCachedTileBytes = 32 << 20

// Open applies the log's migrations on w (dialect SQLite or Postgres),
// loads the log's signing key or makes and stores one, and returns the log.
// r takes the reads (tiles, proofs, checkpoints); pass w twice when there
// is one pool. It fails when opt.Origin differs from the stored key's name.
func Open(ctx context.Context, w, r *sql.DB, dialect string, opt Options) (*Log, error) {
	if err := migrate(ctx, w, dialect); err != nil {
		return nil, err
	}
	skey, vkey, err := loadKey(ctx, w, opt.Origin)
	if err != nil {
		return nil, err
	}
	l := &Log{w: w, r: r, dialect: dialect, vkey: vkey, tiles: bytecache.New[[]byte](maxCachedTileBytes), seq: newSequencer(),
		manual: opt.Manual, tick: cmp.Or(opt.Tick, DefaultTick), maxBatch: cmp.Or(opt.MaxBatch, DefaultMaxBatch)}
	if l.signer, err = note.NewSigner(skey); err != nil {
		return nil, fmt.Errorf("log key: %w", err)
	}
	if l.verifier, err = note.NewVerifier(vkey); err != nil {
		return nil, fmt.Errorf("log verifier key: %w", err)
	}
	if opt.Origin != "" && opt.Origin != l.signer.Name() {
		return nil, fmt.Errorf("--log-origin %q: this database's log was made with origin %q, which cannot change (its checkpoints are signed under that name)", opt.Origin, l.signer.Name())
	}
	if l.insertPending, err = w.PrepareContext(ctx, insertPendingSQL); err != nil {
		return nil, err
	}
	if !l.manual {
		sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		l.seq.stop = stop
		go l.run(sctx)
		l.seq.poke() // entries a crash left pending
	}
	return l, nil
}

func migrate(ctx context.Context, db *sql.DB, dialect string) error {
	gd := goose.DialectSQLite3
	opts := []goose.ProviderOption{goose.WithTableName("translog_db_version"), goose.WithDisableGlobalRegistry(true),
		goose.WithGoMigrations(pendingMigration(dialect))}
	switch dialect {
	case SQLite:
	case Postgres:
		gd = goose.DialectPostgres
		// Several server processes may start at once; a lock id of its own
		// so that it never waits on sqlstore's migrations.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(0x746c6f67)) // "tlog"
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	default:
		return fmt.Errorf("translog: unknown dialect %q (want %q or %q)", dialect, SQLite, Postgres)
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(gd, db, sub, opts...)
	if err != nil {
		return fmt.Errorf("log migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("log migrations: %w", err)
	}
	return nil
}

// loadKey returns the stored key pair, making and storing one named origin
// when there is none. Two processes starting at once store one key: the
// loser's INSERT does nothing and both read the winner's.
func loadKey(ctx context.Context, db *sql.DB, origin string) (skey, vkey string, err error) {
	read := func() error {
		return db.QueryRowContext(ctx, `SELECT signer_key, verifier_key FROM log_signer WHERE id = 1`).Scan(&skey, &vkey)
	}
	if err = read(); !errors.Is(err, sql.ErrNoRows) {
		return skey, vkey, err
	}
	if origin == "" {
		b := make([]byte, 5)
		rand.Read(b)
		origin = "dotlab.log/" + strings.ToLower(base32.StdEncoding.EncodeToString(b))
	}
	s, v, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return "", "", fmt.Errorf("--log-origin %q: %w (a key name has no spaces and no '+')", origin, err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO log_signer (id, signer_key, verifier_key) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING`, s, v); err != nil {
		return "", "", err
	}
	return skey, vkey, read()
}

// Close stops the sequencer (after its running batch) and releases the
// log's prepared statement (the pools stay open: they are the caller's).
// Entries still pending stay so, for the next sequencer.
func (l *Log) Close() error {
	if l.seq.stop != nil {
		l.seq.stop()
		<-l.seq.done
	}
	l.releaseConn()
	return l.insertPending.Close()
}

// Origin is the log's checkpoint origin (and its key name).
func (l *Log) Origin() string { return l.signer.Name() }

// VerifierKey is the log's note verifier key,
// "<origin>+<key id hex>+<base64(0x01 || Ed25519 public key)>", the form
// golang.org/x/mod/sumdb/note.NewVerifier reads.
func (l *Log) VerifierKey() string { return l.vkey }

// Verifier is the log's note verifier.
func (l *Log) Verifier() note.Verifier { return l.verifier }
