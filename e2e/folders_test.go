package e2e

import "testing"

// TestFolders drags instances into a folder, runs a bulk stop on it,
// checks the per-member results and the live table, and previews a move
// whose preflight lists refusals (folders.mjs).
func TestFolders(t *testing.T) { runDemoScript(t, "folders.mjs") }
