package backends

import "context"

// RDPAddresser is implemented by console dialers whose RDP console is a
// TCP address that a native RDP client on this machine reaches directly
// (qemu's loopback forward of the guest's port 3389). `corral vdi
// connect --open`, which runs on the server's machine, starts xfreerdp
// on it.
type RDPAddresser interface {
	// RDPAddress returns host:port of ref's RDP console now; a Conflict
	// when ref is stopped or has no RDP forward.
	RDPAddress(ctx context.Context, ref InstanceRef) (string, error)
}
