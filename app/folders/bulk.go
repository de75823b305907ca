package folders

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Actions are the bulk actions, in the order refusals list them.
var Actions = []string{"start", "stop", "shutdown", "restart", "pause", "resume", "snapshot"}

// Outcomes of one member's action.
const (
	OutcomeOK      = "ok"
	OutcomeFailed  = "failed"
	OutcomeSkipped = "skipped"
)

// Result is what a bulk action did to one member.
type Result struct {
	Ref     string
	Outcome string // OutcomeOK, OutcomeFailed or OutcomeSkipped
	Message string // safe to show; why it failed or was skipped
	Task    string // the member's task, when one ran
	// Err is the cause of a failure, for callers that classify it (the
	// schedule tick retries an unreachable context); never shown.
	Err error
}

// Selection is what a bulk action runs on: the members of Path and its
// subfolders, or the instances named by Refs (canonical refs or
// unambiguous bare names). Exactly one is set.
type Selection struct {
	Path string
	Refs []string
}

// Action runs action on every instance of sel, at most Options.Concurrency
// at once, each member through the instances use case so it is a task of
// its own. A member whose state already is what the action leads to is
// skipped without a call. The whole run is a task too ("folder stop" on
// the path); it is returned with the results in ref order. Only a refusal
// of the request itself (bad action, bad path, unknown folder) is an error.
func (s *Service) Action(ctx context.Context, o tasks.Origin, sel Selection, action string) (store.Task, []Result, error) {
	target := sel.Path
	if target == "" {
		target = fmt.Sprintf("selection of %d", len(sel.Refs))
	}
	spec := tasks.Spec{Action: "folder " + action, Target: target, Origin: o}
	if !slices.Contains(Actions, action) {
		return store.Task{}, nil, s.tasks.Refused(ctx, spec, backends.Invalidf("action %q is not accepted: accepted are %s", action, strings.Join(Actions, ", ")))
	}
	refs, err := s.selection(ctx, sel)
	if err != nil {
		return store.Task{}, nil, s.tasks.Refused(ctx, spec, err)
	}
	var results []Result
	t, _ := s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		r.Logf("%s %d instances, %d at once", action, len(refs), s.limit)
		results = s.fanOut(ctx, o, refs, action)
		failed := 0
		for _, res := range results {
			r.Logf("%s: %s %s", res.Ref, res.Outcome, res.Message)
			if res.Outcome == OutcomeFailed {
				failed++
			}
		}
		if failed > 0 {
			return backends.Failed(fmt.Sprintf("%d of %d instances failed", failed, len(results)), nil)
		}
		return nil
	})
	if results == nil {
		// The run did not happen (the task could not be recorded).
		return t, nil, fmt.Errorf("folders: bulk %s did not run", action)
	}
	return t, results, nil
}

// MemberRefs returns the canonical refs of the members of path and its
// subfolders, sorted: what a bulk action on path would run on.
func (s *Service) MemberRefs(ctx context.Context, path string) ([]string, error) {
	return s.selection(ctx, Selection{Path: path})
}

// selection returns the canonical refs sel names, sorted and unique. A
// bare name that does not resolve is kept as typed and fails on its own.
func (s *Service) selection(ctx context.Context, sel Selection) ([]string, error) {
	switch {
	case sel.Path != "" && len(sel.Refs) > 0:
		return nil, backends.Invalidf("give a folder path or a list of refs, not both")
	case sel.Path != "":
		if err := ValidatePath(sel.Path); err != nil {
			return nil, err
		}
		ms, err := s.store.FolderMembersUnder(ctx, sel.Path)
		if err != nil {
			return nil, storeError(err, sel.Path)
		}
		out := make([]string, 0, len(ms))
		for _, m := range ms {
			out = append(out, m.Ref)
		}
		slices.Sort(out)
		return out, nil
	case len(sel.Refs) > 0:
		out := make([]string, 0, len(sel.Refs))
		for _, text := range sel.Refs {
			if ref, err := s.resolve(text); err == nil {
				text = ref
			}
			out = append(out, text)
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	return nil, backends.Invalidf("a folder path or a list of refs is required")
}

func (s *Service) fanOut(ctx context.Context, o tasks.Origin, refs []string, action string) []Result {
	results := make([]Result, len(refs))
	sem := make(chan struct{}, s.limit)
	snapName := "bulk-" + s.now().UTC().Format("20060102-150405")
	var wg sync.WaitGroup
	for i, ref := range refs {
		results[i] = Result{Ref: ref}
		if msg, ok := s.skip(ref, action); ok {
			results[i].Outcome, results[i].Message = OutcomeSkipped, msg
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i].Outcome, results[i].Message = OutcomeFailed, "not started: the request ended"
				return
			}
			defer func() { <-sem }()
			var t store.Task
			var err error
			if action == "snapshot" {
				t, err = s.instances.Snapshot(ctx, o, ref, instances.SnapshotCreate, snapName)
			} else {
				t, err = s.instances.Power(ctx, o, ref, action)
			}
			results[i].Task = t.ID
			if err != nil {
				results[i].Outcome, results[i].Message, results[i].Err = OutcomeFailed, failure(err, t), err
				return
			}
			results[i].Outcome = OutcomeOK
		}()
	}
	wg.Wait()
	return results
}

// skip decides from the snapshot, before any call, whether action has
// nothing to do on ref.
func (s *Service) skip(text, action string) (string, bool) {
	ref, err := backends.ParseRef(text)
	if err != nil {
		return "", false // let the instances use case refuse it in its task
	}
	in, ok := s.fleet.Snapshot().Find(ref)
	if !ok {
		return "", false
	}
	st := in.State
	switch {
	case (action == "start" || action == "resume") && st == backends.StateRunning:
		return "already running", true
	case (action == "stop" || action == "shutdown") && st == backends.StateStopped:
		return "already stopped", true
	case action == "pause" && st == backends.StatePaused:
		return "already paused", true
	case (action == "restart" || action == "pause" || action == "resume") && st == backends.StateStopped:
		return "stopped: nothing to " + action, true
	}
	return "", false
}

func failure(err error, t store.Task) string {
	if msg := backends.SafeMessage(err); msg != "" {
		return msg
	}
	if t.ID != "" {
		return "the operation failed; the server log has the cause (task " + t.ID + ")"
	}
	return "the operation failed; the server log has the cause"
}
