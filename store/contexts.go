package store

import (
	"context"
	"fmt"
)

// Context is a configured backend universe.
type Context struct {
	Backend string
	Name    string
	// Config is backend-specific JSON, e.g. {"uri": "qemu:///system"}.
	Config string
}

// Contexts returns every configured context ordered by backend and name.
func (s *Store) Contexts(ctx context.Context) ([]Context, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT backend, name, config FROM contexts ORDER BY backend, name`)
	if err != nil {
		return nil, fmt.Errorf("store: list contexts: %w", err)
	}
	defer rows.Close()
	var out []Context
	for rows.Next() {
		var c Context
		if err := rows.Scan(&c.Backend, &c.Name, &c.Config); err != nil {
			return nil, fmt.Errorf("store: list contexts: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// PutContext adds c or replaces the context of the same backend and name.
func (s *Store) PutContext(ctx context.Context, c Context) error {
	if c.Config == "" {
		c.Config = "{}"
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO contexts (backend, name, config, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (backend, name) DO UPDATE SET config = excluded.config`,
		c.Backend, c.Name, c.Config, formatTime(s.now()))
	if err != nil {
		return fmt.Errorf("store: put context %s/%s: %w", c.Backend, c.Name, err)
	}
	return nil
}

// DeleteContext removes a context, or returns ErrNotFound.
func (s *Store) DeleteContext(ctx context.Context, backend, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM contexts WHERE backend = ? AND name = ?`, backend, name)
	if err != nil {
		return fmt.Errorf("store: delete context %s/%s: %w", backend, name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}
