package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Sessions is the session store of the dashboard's sign-in
// (github.com/alexedwards/scs/v2): it implements scs.Store, scs.CtxStore
// and scs.IterableCtxStore over Corral's database, without cgo. Tokens
// reach it already hashed (scs HashTokenInStore), so the table never holds
// a usable cookie.
type Sessions struct{ s *Store }

// Sessions returns the session store.
func (s *Store) Sessions() *Sessions { return &Sessions{s: s} }

// FindCtx returns the data of an unexpired session; found is false for a
// missing or expired token, and err is set only when the database failed.
func (ss *Sessions) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	var b []byte
	err := ss.s.db.QueryRowContext(ctx, `SELECT data FROM sessions WHERE token = ? AND expiry > ?`,
		token, ss.s.now().UnixNano()).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: find session: %w", err)
	}
	return b, true, nil
}

// CommitCtx adds or replaces a session with its data and expiry.
func (ss *Sessions) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	_, err := ss.s.db.ExecContext(ctx, `INSERT INTO sessions (token, data, expiry) VALUES (?, ?, ?)
		ON CONFLICT (token) DO UPDATE SET data = excluded.data, expiry = excluded.expiry`,
		token, b, expiry.UnixNano())
	if err != nil {
		return fmt.Errorf("store: commit session: %w", err)
	}
	return nil
}

// DeleteCtx removes a session; a missing token is not an error.
func (ss *Sessions) DeleteCtx(ctx context.Context, token string) error {
	if _, err := ss.s.db.ExecContext(ctx, `DELETE FROM sessions WHERE token = ?`, token); err != nil {
		return fmt.Errorf("store: delete session: %w", err)
	}
	return nil
}

// AllCtx returns every unexpired session by (hashed) token.
func (ss *Sessions) AllCtx(ctx context.Context) (map[string][]byte, error) {
	rows, err := ss.s.db.QueryContext(ctx, `SELECT token, data FROM sessions WHERE expiry > ?`, ss.s.now().UnixNano())
	if err != nil {
		return nil, fmt.Errorf("store: list sessions: %w", err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var t string
		var b []byte
		if err := rows.Scan(&t, &b); err != nil {
			return nil, fmt.Errorf("store: list sessions: %w", err)
		}
		out[t] = b
	}
	return out, rows.Err()
}

// DeleteExpired removes expired sessions and returns how many.
func (ss *Sessions) DeleteExpired(ctx context.Context) (int64, error) {
	res, err := ss.s.db.ExecContext(ctx, `DELETE FROM sessions WHERE expiry <= ?`, ss.s.now().UnixNano())
	if err != nil {
		return 0, fmt.Errorf("store: delete expired sessions: %w", err)
	}
	return res.RowsAffected()
}

// Find, Commit, Delete and All are the context-free forms scs.Store and
// scs.IterableStore require; scs calls the Ctx forms.
func (ss *Sessions) Find(token string) ([]byte, bool, error) {
	return ss.FindCtx(context.Background(), token)
}

func (ss *Sessions) Commit(token string, b []byte, expiry time.Time) error {
	return ss.CommitCtx(context.Background(), token, b, expiry)
}

func (ss *Sessions) Delete(token string) error { return ss.DeleteCtx(context.Background(), token) }

func (ss *Sessions) All() (map[string][]byte, error) { return ss.AllCtx(context.Background()) }
