package backends

import (
	"fmt"
	"strconv"
	"strings"
)

// InstanceRef identifies one instance across the whole fleet. Names need
// only be unique inside one context; the reference is unique everywhere.
type InstanceRef struct {
	Peer      string // empty for this server's own contexts
	Backend   Kind
	Context   string
	Namespace string // empty for backends without namespaces
	Name      string
}

const (
	peerPrefix   = "peer:"
	noNamespace  = "-"
	refSeparator = "/"
)

// String returns the canonical text form:
//
//	[peer:PEER/]BACKEND/CONTEXT/NAMESPACE/NAME
//
// with "-" for an empty namespace, e.g. "kubevirt/prod/corral-vms/web" or
// "peer:lab/qemu/local/-/dev". Each component is escaped so that the form is
// a valid URL path: bytes outside [A-Za-z0-9._~:@+=-] become %XX (uppercase).
// A namespace that is literally "-" is escaped as %2D to stay distinct.
func (r InstanceRef) String() string {
	var b strings.Builder
	if r.Peer != "" {
		b.WriteString(peerPrefix)
		b.WriteString(escape(r.Peer))
		b.WriteString(refSeparator)
	}
	b.WriteString(escape(string(r.Backend)))
	b.WriteString(refSeparator)
	b.WriteString(escape(r.Context))
	b.WriteString(refSeparator)
	switch r.Namespace {
	case "":
		b.WriteString(noNamespace)
	case noNamespace:
		b.WriteString("%2D")
	default:
		b.WriteString(escape(r.Namespace))
	}
	b.WriteString(refSeparator)
	b.WriteString(escape(r.Name))
	return b.String()
}

// IsZero reports whether r is the zero reference.
func (r InstanceRef) IsZero() bool { return r == InstanceRef{} }

// ContextKey returns "BACKEND/CONTEXT" (with the peer prefix when set): the
// key under which the fleet keeps one context.
func (r InstanceRef) ContextKey() string {
	return ContextKey(r.Peer, r.Backend, r.Context)
}

// ContextKey formats the key of one context as InstanceRef.ContextKey does.
func ContextKey(peer string, backend Kind, context string) string {
	k := escape(string(backend)) + refSeparator + escape(context)
	if peer != "" {
		k = peerPrefix + escape(peer) + refSeparator + k
	}
	return k
}

// Validate reports whether r can be formatted and parsed back: backend,
// context and name are required and no component may be empty text.
func (r InstanceRef) Validate() error {
	if r.Backend == "" || r.Context == "" || r.Name == "" {
		return Invalidf("instance reference needs a backend, a context and a name")
	}
	return nil
}

// ParseRef parses the canonical form produced by String. It accepts only
// that form, so every instance has exactly one spelling: a reference with a
// needless or lowercase escape is refused with the canonical spelling named.
func ParseRef(s string) (InstanceRef, error) {
	const accepted = "accepted is [peer:PEER/]BACKEND/CONTEXT/NAMESPACE/NAME with - for no namespace"
	parts := strings.Split(s, refSeparator)
	var r InstanceRef
	if strings.HasPrefix(s, peerPrefix) {
		if len(parts) != 5 {
			return InstanceRef{}, Invalidf("instance reference %q has %d parts: %s", s, len(parts), accepted)
		}
		p, err := unescape(strings.TrimPrefix(parts[0], peerPrefix))
		if err != nil || p == "" {
			return InstanceRef{}, Invalidf("instance reference %q has a bad peer: %s", s, accepted)
		}
		r.Peer = p
		parts = parts[1:]
	} else if len(parts) != 4 {
		return InstanceRef{}, Invalidf("instance reference %q has %d parts: %s", s, len(parts), accepted)
	}
	var vals [4]string
	for i, p := range parts {
		v, err := unescape(p)
		if err != nil || v == "" {
			return InstanceRef{}, Invalidf("instance reference %q has an empty or badly escaped part: %s", s, accepted)
		}
		vals[i] = v
	}
	r.Backend, r.Context, r.Name = Kind(vals[0]), vals[1], vals[3]
	if parts[2] != noNamespace {
		r.Namespace = vals[2]
	}
	if canon := r.String(); canon != s {
		return InstanceRef{}, Invalidf("instance reference %q is not in canonical form: use %q", s, canon)
	}
	return r, nil
}

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("._~:@+=-", c) >= 0
}

func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("backends: truncated escape in %q", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("backends: bad escape %q", s[i:i+3])
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}

// SplitRefPath splits an escaped URL path tail such as
// "libvirt/lab/-/web/snapshots/s1" into the instance as the caller typed it
// and the sub-path after it ("snapshots/s1"). The instance is a canonical
// reference (kept escaped, as ParseRef wants it) when the path starts with
// "peer:" (five components) or with a backend kind Corral knows (four);
// otherwise it is a bare name (one component, unescaped). Empty components
// and a canonical ref with fewer than four components are Invalid.
func SplitRefPath(p string) (ref, rest string, err error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return "", "", NotFoundf("no instance named in the path")
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		if s == "" {
			return "", "", Invalidf("the path %q has an empty component", p)
		}
	}
	n := 1
	switch {
	case strings.HasPrefix(segs[0], peerPrefix):
		n = 5
	case knownKind(segs[0]):
		// A path that starts with a backend kind is a canonical ref, so an
		// instance named like a backend ("qemu") needs its canonical ref.
		n = 4
	}
	if len(segs) < n {
		return "", "", Invalidf("instance reference %q is incomplete: accepted is [peer:PEER/]BACKEND/CONTEXT/NAMESPACE/NAME", p)
	}
	ref = strings.Join(segs[:n], "/")
	if n == 1 {
		if ref, err = unescape(ref); err != nil {
			return "", "", Invalidf("the instance name in the path is not valid URL escaping")
		}
	}
	return ref, strings.Join(segs[n:], "/"), nil
}

func knownKind(s string) bool {
	switch Kind(s) {
	case KindQEMU, KindLibvirt, KindKubeVirt, KindIncus, KindProxmox, KindPeer, KindSim:
		return true
	}
	return false
}
