package ui

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/corral-dev/corral/backends"
)

// vmPath splits the escaped path after /vm/ into the instance as typed (a
// canonical ref, kept escaped for ParseRef, or an unescaped bare name) and
// a trailing action. A canonical ref has four components, or five with a
// "peer:" prefix; anything else is a bare name.
func vmPath(r *http.Request) (ref, action string, err error) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/vm/")
	if !ok || rest == "" {
		return "", "", backends.NotFoundf("no instance named in the path")
	}
	segs := strings.Split(rest, "/")
	n := 1
	switch {
	case strings.HasPrefix(segs[0], "peer:"):
		n = 5
	case len(segs) >= 4:
		n = 4
	}
	if len(segs) < n || len(segs) > n+1 || hasEmpty(segs) {
		return "", "", backends.NotFoundf("no dashboard page at this path")
	}
	ref = strings.Join(segs[:n], "/")
	if n == 1 {
		if ref, err = url.PathUnescape(ref); err != nil {
			return "", "", backends.Invalidf("the instance name in the path is not valid URL escaping")
		}
	}
	if len(segs) == n+1 {
		action = segs[n]
	}
	return ref, action, nil
}

func hasEmpty(segs []string) bool {
	for _, s := range segs {
		if s == "" {
			return true
		}
	}
	return false
}
