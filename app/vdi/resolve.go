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

// ResolveDesktop returns the desktop ID named by text: a desktop ID
// (vm/NAMESPACE/MEMBER) as is, or a member name that names exactly one
// desktop.
func (s *Service) ResolveDesktop(ctx context.Context, text string) (string, error) {
	if strings.Contains(text, "/") {
		return text, nil
	}
	rows, err := s.opts.Store.VDIPools(ctx)
	if err != nil {
		return "", err
	}
	var found []string
	for _, r := range rows {
		for _, m := range r.Members {
			if d, err := ParseDesktopID(m.Desktop); err == nil && d.Member == text {
				found = append(found, m.Desktop)
			}
		}
	}
	return one("desktop", text, found)
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
