package auth

import (
	"context"
	"log/slog"

	"github.com/corral-dev/corral/store"
)

// AuditStore is the slice of the store the auditor writes to.
type AuditStore interface {
	AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error)
}

// Auditor writes the audit rows of what happens before any use case
// runs: refused requests (401, 403, cross-origin), sign-ins and sign-outs.
// Mutations that reach a use case are audited by app/tasks.
type Auditor struct {
	store AuditStore
	log   *slog.Logger
}

// NewAuditor returns an auditor writing to s.
func NewAuditor(s AuditStore, log *slog.Logger) *Auditor {
	if log == nil {
		log = slog.Default()
	}
	return &Auditor{store: s, log: log}
}

// Audit outcomes this package writes (the same words as app/tasks).
const (
	OutcomeOK      = "ok"
	OutcomeRefused = "refused"
	OutcomeError   = "error"
)

// Record appends one audit row. A lost row is logged, not returned: the
// caller's answer does not depend on it.
func (a *Auditor) Record(ctx context.Context, id Identity, surface, action, target, outcome, detail string) {
	if a == nil || a.store == nil {
		return
	}
	_, err := a.store.AppendAudit(context.WithoutCancel(ctx), store.AuditEntry{
		Actor: id.Actor(), Surface: surface, Action: action, Target: target, Outcome: outcome, Detail: detail,
	})
	if err != nil {
		a.log.Error("auth: audit row lost", "action", action, "target", target, "err", err)
	}
}
