package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// MaxFolderDepth is how deep folders nest: "a/b/c" has depth 3.
const MaxFolderDepth = 8

// ErrFolderDepth is returned when a folder, or a folder of a moved
// subtree, would be deeper than MaxFolderDepth.
var ErrFolderDepth = errors.New("store: folder too deep")

// ErrFolderCycle is returned when a folder is moved to itself or under
// one of its own subfolders.
var ErrFolderCycle = errors.New("store: folder moved under itself")

// FolderMember is one instance's membership: its canonical ref and the
// path of its folder.
type FolderMember struct {
	Ref  string
	Path string
}

// FolderDepth returns the number of segments of path.
func FolderDepth(path string) int { return strings.Count(path, "/") + 1 }

// folderAncestors returns the proper ancestors of path, shallowest first:
// "a/b/c" gives "a", "a/b".
func folderAncestors(path string) []string {
	var out []string
	for i, c := range path {
		if c == '/' {
			out = append(out, path[:i])
		}
	}
	return out
}

// under reports the SQL condition and arguments selecting path and its
// subtree. The LIKE pattern escapes the path's own % and _ characters.
func under(column, path string) (string, []any) {
	esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(path)
	return "(" + column + " = ? OR " + column + ` LIKE ? ESCAPE '\')`, []any{path, esc + "/%"}
}

// CreateFolder creates the folder path and any missing ancestors. The path
// is taken as given: its syntax is the caller's to check. It returns
// ErrExists when path exists and ErrFolderDepth when it is too deep.
func (s *Store) CreateFolder(ctx context.Context, path string) error {
	if FolderDepth(path) > MaxFolderDepth {
		return ErrFolderDepth
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: create folder: %w", err)
	}
	defer tx.Rollback()
	now := formatTime(s.now())
	for _, p := range folderAncestors(path) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO folders (path, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING`, p, now); err != nil {
			return fmt.Errorf("store: create folder %s: %w", p, err)
		}
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO folders (path, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING`, path, now)
	if err != nil {
		return fmt.Errorf("store: create folder %s: %w", path, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrExists
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: create folder %s: %w", path, err)
	}
	return nil
}

// Folders returns every folder's path in order, parents before children.
func (s *Store) Folders(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT path FROM folders ORDER BY path`)
	if err != nil {
		return nil, fmt.Errorf("store: list folders: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("store: list folders: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func folderExists(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, path string) (bool, error) {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM folders WHERE path = ?`, path).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: folder %s: %w", path, err)
	}
	return true, nil
}

// MoveFolder renames from to to with its whole subtree, members included,
// creating the missing ancestors of to. It returns ErrNotFound when from
// does not exist, ErrExists when to does, ErrFolderCycle when to is from
// or below it, and ErrFolderDepth when a moved folder would be too deep.
func (s *Store) MoveFolder(ctx context.Context, from, to string) error {
	if to == from || strings.HasPrefix(to, from+"/") {
		return ErrFolderCycle
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: move folder: %w", err)
	}
	defer tx.Rollback()
	if ok, err := folderExists(ctx, tx, from); err != nil {
		return err
	} else if !ok {
		return ErrNotFound
	}
	if ok, err := folderExists(ctx, tx, to); err != nil {
		return err
	} else if ok {
		return ErrExists
	}
	cond, args := under("path", from)
	rows, err := tx.QueryContext(ctx, `SELECT path FROM folders WHERE `+cond, args...)
	if err != nil {
		return fmt.Errorf("store: move folder %s: %w", from, err)
	}
	deepest := 0
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return fmt.Errorf("store: move folder %s: %w", from, err)
		}
		deepest = max(deepest, FolderDepth(p))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: move folder %s: %w", from, err)
	}
	if FolderDepth(to)+deepest-FolderDepth(from) > MaxFolderDepth {
		return ErrFolderDepth
	}
	now := formatTime(s.now())
	for _, p := range folderAncestors(to) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO folders (path, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING`, p, now); err != nil {
			return fmt.Errorf("store: create folder %s: %w", p, err)
		}
	}
	// Members follow through ON UPDATE CASCADE. No new path collides with
	// an old one: to does not exist, so nothing exists below it either.
	_, err = tx.ExecContext(ctx, `UPDATE folders SET path = ? || substr(path, ?) WHERE `+cond,
		append([]any{to, len(from) + 1}, args...)...)
	if err != nil {
		return fmt.Errorf("store: move folder %s: %w", from, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: move folder %s: %w", from, err)
	}
	return nil
}

// DeleteFolder removes path and its subtree and unfolders their members
// (the instances themselves are not the store's). It returns how many
// members were unfoldered, or ErrNotFound.
func (s *Store) DeleteFolder(ctx context.Context, path string) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: delete folder: %w", err)
	}
	defer tx.Rollback()
	if ok, err := folderExists(ctx, tx, path); err != nil {
		return 0, err
	} else if !ok {
		return 0, ErrNotFound
	}
	mcond, margs := under("folder", path)
	res, err := tx.ExecContext(ctx, `DELETE FROM folder_members WHERE `+mcond, margs...)
	if err != nil {
		return 0, fmt.Errorf("store: delete folder %s: %w", path, err)
	}
	n, _ := res.RowsAffected()
	cond, args := under("path", path)
	if _, err := tx.ExecContext(ctx, `DELETE FROM folders WHERE `+cond, args...); err != nil {
		return 0, fmt.Errorf("store: delete folder %s: %w", path, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: delete folder %s: %w", path, err)
	}
	return int(n), nil
}

// SetFolderMember puts ref in the folder path, taking it out of the folder
// it was in. It returns ErrNotFound when path does not exist.
func (s *Store) SetFolderMember(ctx context.Context, path, ref string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: set folder member: %w", err)
	}
	defer tx.Rollback()
	if ok, err := folderExists(ctx, tx, path); err != nil {
		return err
	} else if !ok {
		return ErrNotFound
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO folder_members (ref, folder, added_at) VALUES (?, ?, ?)
		ON CONFLICT (ref) DO UPDATE SET folder = excluded.folder, added_at = excluded.added_at`, ref, path, formatTime(s.now()))
	if err != nil {
		return fmt.Errorf("store: set folder member %s: %w", ref, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: set folder member %s: %w", ref, err)
	}
	return nil
}

// FolderOf returns the folder ref is in, or ErrNotFound when it is in
// none.
func (s *Store) FolderOf(ctx context.Context, ref string) (string, error) {
	var path string
	err := s.db.QueryRowContext(ctx, `SELECT folder FROM folder_members WHERE ref = ?`, ref).Scan(&path)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("store: folder of %s: %w", ref, err)
	}
	return path, nil
}

// RemoveFolderMember takes ref out of its folder, or returns ErrNotFound
// when it is in none.
func (s *Store) RemoveFolderMember(ctx context.Context, ref string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM folder_members WHERE ref = ?`, ref)
	if err != nil {
		return fmt.Errorf("store: remove folder member %s: %w", ref, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// FolderMembers returns every membership, ordered by folder then ref.
func (s *Store) FolderMembers(ctx context.Context) ([]FolderMember, error) {
	return s.folderMembers(ctx, `SELECT ref, folder FROM folder_members ORDER BY folder, ref`)
}

// FolderMembersUnder returns the members of path and of its subfolders,
// ordered by folder then ref, or ErrNotFound when path does not exist.
func (s *Store) FolderMembersUnder(ctx context.Context, path string) ([]FolderMember, error) {
	if ok, err := folderExists(ctx, s.db, path); err != nil {
		return nil, err
	} else if !ok {
		return nil, ErrNotFound
	}
	cond, args := under("folder", path)
	return s.folderMembers(ctx, `SELECT ref, folder FROM folder_members WHERE `+cond+` ORDER BY folder, ref`, args...)
}

func (s *Store) folderMembers(ctx context.Context, q string, args ...any) ([]FolderMember, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list folder members: %w", err)
	}
	defer rows.Close()
	out := []FolderMember{}
	for rows.Next() {
		var m FolderMember
		if err := rows.Scan(&m.Ref, &m.Path); err != nil {
			return nil, fmt.Errorf("store: list folder members: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
