package vdi

import (
	"context"
	"strings"

	"github.com/corral-dev/corral/backends"
)

// ResolvePool returns the pool ID named by text: a pool ID
// (vm/NAMESPACE/POOL) as is, or a pool name that names exactly one pool.
func (s *Service) ResolvePool(ctx context.Context, text string) (string, error) {
	if strings.Contains(text, "/") {
		return text, nil
	}
	rows, err := s.opts.Store.VDIPools(ctx)
	if err != nil {
		return "", err
	}
	var found []string
	for _, r := range rows {
		if r.Name == text {
			found = append(found, r.ID)
		}
	}
	return one("pool", text, found)
}

// ResolveDesktopKind returns the desktop ID named by text: a desktop ID
// (vm/NAMESPACE/MEMBER, ct/NAMESPACE/MEMBER) as is, or a member name that
// names exactly one desktop of kind ("vm" or "ct"; "" both): a VM pool
// member, or a claimed CT pool member. The kind tells a CT member and a
// VM of the same name apart (corral vdi connect --kind). A CT member is
// found while it is claimed (its Lease names it); one without a claim
// has nothing to connect to. When the CT claims cannot be read, the
// answer is that error unless a VM desktop (kind "") has the name.
func (s *Service) ResolveDesktopKind(ctx context.Context, kind, text string) (string, error) {
	if kind != "" && kind != "vm" && kind != "ct" {
		return "", backends.Invalidf("kind %q: accepted are vm and ct", kind)
	}
	if strings.Contains(text, "/") {
		if d, err := ParseDesktopID(text); err == nil && kind != "" && d.Kind != kind {
			return "", backends.Invalidf("desktop %s is not of kind %s", text, kind)
		}
		return text, nil
	}
	var found []string
	if kind != "ct" {
		rows, err := s.opts.Store.VDIPools(ctx)
		if err != nil {
			return "", err
		}
		for _, r := range rows {
			for _, m := range r.Members {
				if d, err := ParseDesktopID(m.Desktop); err == nil && d.Member == text {
					found = append(found, m.Desktop)
				}
			}
		}
	}
	if kind != "vm" && s.opts.CT != nil {
		claims, err := s.opts.CT.Claims(ctx)
		switch {
		case err != nil && (kind == "ct" || len(found) == 0):
			// An unreachable cluster is not "no desktop of that name".
			return "", err
		case err != nil:
			s.opts.Log.Warn("vdi: CT desktops not searched; the VM desktop is taken", "name", text, "err", err)
		}
		for _, c := range claims {
			if c.Desktop.Member == text {
				found = append(found, c.Desktop.String())
			}
		}
	}
	what := "desktop"
	switch kind {
	case "vm":
		what = "VM desktop"
	case "ct":
		what = "claimed CT desktop"
	}
	return one(what, text, found)
}

func one(what, text string, found []string) (string, error) {
	switch len(found) {
	case 0:
		return "", backends.NotFoundf("no %s is named %s", what, text)
	case 1:
		return found[0], nil
	}
	return "", backends.Invalidf("%s %s is ambiguous: name one of %s", what, text, strings.Join(found, ", "))
}
