// Package store is the only package that speaks SQL. It keeps Corral's
// state in one SQLite file (modernc.org/sqlite: no cgo), applies the
// embedded migrations with goose at open, and offers one file of methods
// per entity. A missing row is ErrNotFound, never (nil, nil).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/corral-dev/corral/migrations"
)

// ErrNotFound is returned when a row does not exist.
var ErrNotFound = errors.New("store: not found")

// ErrTooNew is returned by Open when the database was migrated by a newer
// Corral than this binary: running it could corrupt what the newer one wrote.
var ErrTooNew = errors.New("store: database is newer than this binary")

// Store is Corral's state in SQLite. It is safe for concurrent use.
type Store struct {
	db  *sql.DB
	now func() time.Time

	auditMu sync.Mutex // serializes audit appends so the chain stays linear
}

// Options configure Open.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultPath returns the database path under dir, or under the user's
// data directory ($XDG_DATA_HOME/corral, else ~/.local/share/corral) when
// dir is empty.
func DefaultPath(dir string) (string, error) {
	if dir == "" {
		base := os.Getenv("XDG_DATA_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("store: no data directory: %w", err)
			}
			base = filepath.Join(home, ".local", "share")
		}
		dir = filepath.Join(base, "corral")
	}
	return filepath.Join(dir, "corral.db"), nil
}

// Open opens (creating if needed) the database at path with WAL, foreign
// keys and a busy timeout, creates the file with mode 0600, and applies the
// embedded migrations. It returns ErrTooNew when the database's schema
// version is beyond this binary's newest migration.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: create data directory: %w", err)
	}
	// Create the file ourselves so it is never world-readable, even for the
	// moment before SQLite would have created it with the umask's mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: create database: %w", err)
	}
	f.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("store: database mode: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	s := &Store{db: db, now: opts.Now}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	p, err := goose.NewProvider(goose.DialectSQLite3, s.db, migrations.FS)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	sources := p.ListSources()
	newest := sources[len(sources)-1].Version
	current, err := p.GetDBVersion(ctx)
	if err != nil && !errors.Is(err, goose.ErrNoCurrentVersion) {
		return fmt.Errorf("store: read schema version: %w", err)
	}
	if current > newest {
		return fmt.Errorf("%w: it has schema version %d and this binary knows up to %d; run the newer corral or restore a backup", ErrTooNew, current, newest)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: apply migrations: %w", err)
	}
	return nil
}

// SchemaVersion returns the applied schema version.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	p, err := goose.NewProvider(goose.DialectSQLite3, s.db, migrations.FS)
	if err != nil {
		return 0, fmt.Errorf("store: migrations: %w", err)
	}
	return p.GetDBVersion(ctx)
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// DB returns the handle for tests that must reach under the store, such
// as the audit tamper test. Production code never calls it.
func (s *Store) DB() *sql.DB { return s.db }

const timeFormat = time.RFC3339Nano

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, _ := time.Parse(timeFormat, s)
	return t
}
