package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestOpenFileMode(t *testing.T) {
	_, path := openTest(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Fatalf("database mode %o, want 600", mode)
	}
}

func TestOpenRefusesNewerDatabase(t *testing.T) {
	s, path := openTest(t)
	ctx := context.Background()
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Pretend a newer corral migrated this database.
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)`, v+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(ctx, path, Options{})
	if !errors.Is(err, ErrTooNew) {
		t.Fatalf("Open of a newer database: %v, want ErrTooNew", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(v+1)) {
		t.Fatalf("error %q does not name the database's version", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	s, path := openTest(t)
	ctx := context.Background()
	if err := s.PutContext(ctx, Context{Backend: "libvirt", Name: "test", Config: `{"uri":"test:///default"}`}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	cs, err := s2.Contexts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Name != "test" || cs[0].Config != `{"uri":"test:///default"}` {
		t.Fatalf("contexts after reopen = %+v", cs)
	}
}

func TestEnsureInstanceStableVMID(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	a, err := s.EnsureInstance(ctx, "sim/a/-/web")
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.EnsureInstance(ctx, "sim/a/-/web")
	if err != nil {
		t.Fatal(err)
	}
	if a.VMID != again.VMID || a.VMID < 100 {
		t.Fatalf("vmid %d then %d", a.VMID, again.VMID)
	}
	// A second database assigns the same vmid to the same ref.
	s2, _ := openTest(t)
	b, err := s2.EnsureInstance(ctx, "sim/a/-/web")
	if err != nil {
		t.Fatal(err)
	}
	if b.VMID != a.VMID {
		t.Fatalf("vmid differs across databases: %d vs %d", a.VMID, b.VMID)
	}
	if _, err := s.Instance(ctx, "sim/a/-/none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing instance: %v", err)
	}
}

func TestTasksInterruptedAtStart(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for _, id := range []string{"t1", "t2"} {
		if err := s.CreateTask(ctx, Task{ID: id, Action: "start", Target: "sim/a/-/x", Actor: "alice", Surface: "rest", CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FinishTask(ctx, "t1", TaskDone, "", now); err != nil {
		t.Fatal(err)
	}
	ids, err := s.InterruptRunningTasks(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "t2" {
		t.Fatalf("interrupted %v, want [t2]", ids)
	}
	t2, err := s.Task(ctx, "t2")
	if err != nil {
		t.Fatal(err)
	}
	if t2.Status != TaskInterrupted {
		t.Fatalf("t2 status %q", t2.Status)
	}
	t1, _ := s.Task(ctx, "t1")
	if t1.Status != TaskDone || t1.Progress != 100 {
		t.Fatalf("t1 = %+v", t1)
	}
}

func TestAuditChain(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.AppendAudit(ctx, AuditEntry{Actor: "alice", Surface: "rest", Action: "start", Target: fmt.Sprintf("sim/a/-/vm%d", i), Outcome: "ok"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	n, err := s.VerifyAudit(ctx)
	if err != nil || n != 20 {
		t.Fatalf("VerifyAudit = %d, %v; want 20, nil", n, err)
	}
	// The table refuses edits through SQL...
	if _, err := s.DB().ExecContext(ctx, `UPDATE audit SET outcome = 'error' WHERE id = 7`); err == nil {
		t.Fatal("an UPDATE of the audit table succeeded")
	}
	// ...and an edit made after dropping the trigger is found.
	if _, err := s.DB().ExecContext(ctx, `DROP TRIGGER audit_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `UPDATE audit SET actor = 'mallory' WHERE id = 7`); err != nil {
		t.Fatal(err)
	}
	_, err = s.VerifyAudit(ctx)
	var broken *BrokenLink
	if !errors.As(err, &broken) || broken.ID != 7 {
		t.Fatalf("VerifyAudit after an edit of row 7 = %v, want a broken link at 7", err)
	}
}

func TestAuditDeletedRow(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	for range 5 {
		if _, err := s.AppendAudit(ctx, AuditEntry{Actor: "a", Action: "stop", Target: "x", Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	s.DB().ExecContext(ctx, `DROP TRIGGER audit_no_delete`)
	if _, err := s.DB().ExecContext(ctx, `DELETE FROM audit WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	_, err := s.VerifyAudit(ctx)
	var broken *BrokenLink
	if !errors.As(err, &broken) || broken.ID != 4 {
		t.Fatalf("VerifyAudit after deleting row 3 = %v, want a broken link at 4", err)
	}
}
