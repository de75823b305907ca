package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// refText returns the instance named by the path after prefix, as
// handlers/ui does for /vm/: a canonical ref (four components, five with a
// "peer:" prefix) kept escaped for ParseRef, or a bare name unescaped. The
// escaped path is used because a ref's components may hold escaped slashes.
func refText(r *http.Request, prefix string) (string, error) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
	if !ok || rest == "" {
		return "", backends.NotFoundf("no instance named in the path")
	}
	segs := strings.Split(rest, "/")
	n := 1
	switch {
	case strings.HasPrefix(segs[0], "peer:"):
		n = 5
	case len(segs) > 1:
		n = 4
	}
	if len(segs) != n {
		return "", backends.NotFoundf("no console at this path")
	}
	for _, s := range segs {
		if s == "" {
			return "", backends.NotFoundf("no console at this path")
		}
	}
	if n == 1 {
		name, err := url.PathUnescape(rest)
		if err != nil {
			return "", backends.Invalidf("the instance name in the path is not valid URL escaping")
		}
		return name, nil
	}
	return rest, nil
}

// target is an instance whose backend can dial its consoles.
type target struct {
	ref    backends.InstanceRef
	b      backends.Backend
	dialer backends.ConsoleDialer
}

// resolve finds the instance named after prefix and its backend's console
// dialer: NotFound for an unknown instance, Deps.Allow's error for a
// caller it refuses, the typed refusal (400) for a backend without
// consoles.
func (s *server) resolve(r *http.Request, prefix string) (target, error) {
	text, err := refText(r, prefix)
	if err != nil {
		return target{}, err
	}
	ref, err := s.Fleet.Snapshot().Resolve(text)
	if err != nil {
		return target{}, err
	}
	// Who may open it is decided first: a refused caller learns nothing
	// of the instance's consoles.
	if s.Allow != nil {
		if err := s.Allow(r.Context(), middleware.IdentityFrom(r.Context()), ref); err != nil {
			return target{}, err
		}
	}
	b, err := s.Fleet.Backend(ref)
	if err != nil {
		return target{}, err
	}
	d, err := backends.Consoles(b)
	if err != nil {
		return target{}, err
	}
	return target{ref: ref, b: b, dialer: d}, nil
}

// wsURL is the bridge of ref's console of kind.
func wsURL(kind backends.ConsoleKind, ref backends.InstanceRef) string {
	return "/ws/" + string(kind) + "/" + ref.String()
}

// pageURL is the console page of ref for kind.
func pageURL(kind backends.ConsoleKind, ref backends.InstanceRef) string {
	return "/console/" + ref.String() + "?kind=" + string(kind)
}
