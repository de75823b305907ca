package fleet

import (
	"strings"

	"github.com/corral-dev/corral/backends"
)

// Ambiguous is the error for a bare name that several instances carry. It
// is an Invalid error (400) and lists the candidates' canonical refs.
type Ambiguous struct {
	Name       string
	Candidates []string
}

func (a *Ambiguous) Error() string {
	return "name " + a.Name + " is ambiguous: use one of " + strings.Join(a.Candidates, ", ")
}

// Safe marks the message as safe to show: it holds only refs.
func (a *Ambiguous) Safe() string { return a.Error() }

// Is makes errors.Is(err, backends.ErrInvalid) hold.
func (a *Ambiguous) Is(target error) bool { return target == backends.ErrInvalid }

// Resolve turns what a caller typed into a reference: a canonical ref is
// parsed (and need not be in the snapshot, so a just-created instance can
// be addressed); a bare name must match exactly one instance of the
// snapshot. No match is NotFound; several are *Ambiguous.
func (s *Snapshot) Resolve(text string) (backends.InstanceRef, error) {
	if strings.Contains(text, "/") {
		return backends.ParseRef(text)
	}
	if text == "" {
		return backends.InstanceRef{}, backends.Invalidf("an instance name or reference is required")
	}
	var found []backends.InstanceRef
	for _, in := range s.Instances {
		if in.Ref.Name == text {
			found = append(found, in.Ref)
		}
	}
	switch len(found) {
	case 0:
		return backends.InstanceRef{}, backends.NotFoundf("no instance is named %s", text)
	case 1:
		return found[0], nil
	}
	a := &Ambiguous{Name: text}
	for _, r := range found {
		a.Candidates = append(a.Candidates, r.String())
	}
	return backends.InstanceRef{}, a
}
