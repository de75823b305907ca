package backends

// ValidateName reports whether name is acceptable for an instance, clone
// or snapshot ("what" names which): 1 to 63 lowercase letters, digits and
// dashes, starting with a letter or digit. It is the rule Kubernetes and
// DNS agree on, so a name valid on one backend moves to any other; backends
// that would accept more (libvirt takes almost anything) check it first.
func ValidateName(what, name string) error {
	const rule = "use 1 to 63 lowercase letters, digits and dashes, starting with a letter or digit ([a-z0-9][a-z0-9-]*)"
	if name == "" || len(name) > 63 {
		return Invalidf("%s name %q is not accepted: %s", what, name, rule)
	}
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0) {
			return Invalidf("%s name %q is not accepted: %s", what, name, rule)
		}
	}
	return nil
}
