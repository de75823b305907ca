package console

import "github.com/corral-dev/corral/backends"

// SessionHook is told of every console viewer (VNC, serial, RDP) the bridges open and
// closes, once each: the VDI broker counts a desktop's open consoles to
// apply its disconnect grace. Calls must return quickly.
type SessionHook interface {
	ConsoleOpened(ref backends.InstanceRef)
	ConsoleClosed(ref backends.InstanceRef)
}

// opened tells the hook a viewer of ref connected and returns the call
// that tells it the viewer left.
func (s *server) opened(ref backends.InstanceRef) func() {
	if s.Sessions == nil {
		return func() {}
	}
	s.Sessions.ConsoleOpened(ref)
	return func() { s.Sessions.ConsoleClosed(ref) }
}
