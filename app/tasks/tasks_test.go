package tasks_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestDoRecordsTaskAndAudit(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "c.db"))
	defer st.Close()
	m := tasks.New(st, tasks.Options{})
	defer m.Close()
	ctx := context.Background()
	o := tasks.Origin{Actor: "alice", Surface: "rest"}
	done, err := m.Do(ctx, tasks.Spec{Action: "start", Target: "sim/a/-/x", Origin: o}, func(ctx context.Context, r *tasks.Run) error {
		r.Logf("starting")
		r.Progress(50)
		return nil
	})
	if err != nil || done.Status != store.TaskDone || done.Progress != 100 {
		t.Fatalf("Do = %+v, %v", done, err)
	}
	_, err = m.Do(ctx, tasks.Spec{Action: "stop", Target: "sim/a/-/x", Origin: o}, func(ctx context.Context, r *tasks.Run) error {
		return backends.Failed("hypervisor failed", errors.New("secret cause"))
	})
	if !errors.Is(err, backends.ErrFailed) {
		t.Fatalf("Do of a failing task = %v", err)
	}
	_, err = m.Do(ctx, tasks.Spec{Action: "pause", Target: "sim/a/-/x", Origin: o}, func(ctx context.Context, r *tasks.Run) error {
		panic("boom")
	})
	if err == nil {
		t.Fatal("a panicking task reported success")
	}
	m.Refused(ctx, tasks.Spec{Action: "explode", Target: "x", Origin: o}, backends.Invalidf("unknown action"))
	recent, _ := m.Recent(ctx, 10)
	if len(recent) != 3 || recent[1].Status != store.TaskError || recent[1].Error != "hypervisor failed" {
		t.Fatalf("recent tasks = %+v", recent)
	}
	if strings.Contains(recent[1].Error, "secret") {
		t.Fatal("task error shows the cause")
	}
	audit, _ := m.Audit(ctx, store.AuditFilter{})
	var got []string
	for _, a := range audit {
		got = append(got, a.Action+":"+a.Outcome)
	}
	if strings.Join(got, " ") != "explode:refused pause:error stop:error start:ok" {
		t.Fatalf("audit = %v", got)
	}
}

func TestInterruptedAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	st := openStore(t, path)
	m := tasks.New(st, tasks.Options{})
	started := make(chan struct{})
	task, err := m.Start(context.Background(), tasks.Spec{Action: "create", Target: "sim/a/-/big", Origin: tasks.Origin{Actor: "bob", Surface: "dashboard"}},
		func(ctx context.Context, r *tasks.Run) error {
			close(started)
			time.Sleep(time.Hour) // the server dies first
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	// Simulate a crash: the store is closed under the running task and a
	// new server opens the same file.
	st.Close()
	st2 := openStore(t, path)
	defer st2.Close()
	m2 := tasks.New(st2, tasks.Options{})
	ids, err := m2.Recover(context.Background())
	if err != nil || len(ids) != 1 || ids[0] != task.ID {
		t.Fatalf("Recover = %v, %v", ids, err)
	}
	got, _, err := m2.Get(context.Background(), task.ID)
	if err != nil || got.Status != store.TaskInterrupted {
		t.Fatalf("task after restart = %+v, %v", got, err)
	}
	audit, _ := m2.Audit(context.Background(), store.AuditFilter{Outcome: tasks.OutcomeInterrupted})
	if len(audit) != 1 || audit[0].Actor != "bob" || audit[0].Target != "sim/a/-/big" {
		t.Fatalf("audit of the interrupted task = %+v", audit)
	}
	if _, _, err := m2.Get(context.Background(), "nope"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get(nope) = %v", err)
	}
}
