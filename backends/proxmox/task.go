package proxmox

import (
	"context"
	"errors"

	proxmox "github.com/luthermonson/go-proxmox"
)

// do POSTs (or DELETEs, when method says so) to path, which answers a
// UPID, and waits for the task to finish. op and name make the safe
// message of any error.
func (b *Backend) do(ctx context.Context, method, path string, params any, op, name string) error {
	var upid proxmox.UPID
	var err error
	switch method {
	case "DELETE":
		err = b.c.DeleteWithParams(ctx, path, params, &upid)
	default:
		err = b.c.Post(ctx, path, params, &upid)
	}
	if err != nil {
		return b.fail(op, name, err)
	}
	return b.wait(ctx, upid, op, name)
}

// wait polls the task until it finishes. A server that answers a change
// with no UPID (null data) did it synchronously.
func (b *Backend) wait(ctx context.Context, upid proxmox.UPID, op, name string) error {
	t := proxmox.NewTask(upid, b.c)
	if t == nil {
		return nil
	}
	if err := t.Wait(ctx, b.opts.PollInterval, b.opts.TaskTimeout); err != nil {
		if errors.Is(err, proxmox.ErrTimeout) {
			// The task may still finish; say so rather than "failed".
			b.opts.Logger.Warn("proxmox: task still running", "context", b.opts.Context, "op", op, "name", name)
		}
		return b.fail(op, name, err)
	}
	return nil
}
