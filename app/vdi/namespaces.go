package vdi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// NoNamespace is the namespace of the pools on backends without
// namespaces (vm/-/POOL).
const NoNamespace = "-"

// ParseNamespaces parses CORRAL_VDI_NAMESPACES: comma-separated
// namespaces, each a DNS-1123 label or "-" (the pools on backends without
// namespaces). Empty means none given: the broker serves every pool.
func ParseNamespaces(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []string
	for _, ns := range strings.Split(v, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			return nil, fmt.Errorf("CORRAL_VDI_NAMESPACES=%q: an empty name; accepted are comma-separated namespaces (DNS-1123 labels such as desktops, or - for the pools on backends without namespaces)", v)
		}
		if ns != NoNamespace {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return nil, fmt.Errorf("CORRAL_VDI_NAMESPACES: %q is not a namespace: accepted are DNS-1123 labels (lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit) or - for the pools on backends without namespaces", ns)
			}
		}
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// serves reports whether the broker serves the pools of namespace ns
// (Options.Namespaces; none given: every namespace).
func (s *Service) serves(ns string) bool {
	return len(s.opts.Namespaces) == 0 || slices.Contains(s.opts.Namespaces, ns)
}

// servedPools returns the registered pools the broker serves: those in
// its namespaces. The admin's pool commands read s.pools, every pool.
func (s *Service) servedPools(ctx context.Context) ([]*pool, error) {
	ps, err := s.pools(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ps, func(p *pool) bool { return !s.serves(p.id.Namespace) }), nil
}

// servedClaims drops the claims on desktops outside the broker's
// namespaces.
func (s *Service) servedClaims(cs []Claim) []Claim {
	return slices.DeleteFunc(cs, func(c Claim) bool { return !s.serves(c.Desktop.Namespace) })
}
