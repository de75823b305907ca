package e2e

import "testing"

// TestFolders drags instances into a folder, runs a bulk stop on it and
// checks the per-member results and the live table (folders.mjs).
func TestFolders(t *testing.T) { runDemoScript(t, "folders.mjs") }
