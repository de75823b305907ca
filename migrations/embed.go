// Package migrations holds Corral's numbered SQL migrations, embedded into
// the binary and applied with goose at start. A migration that has landed is
// never edited: add a new numbered file instead.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
