package qemu

import "github.com/corral-dev/corral/internal/qemuimg"

// The qemu binaries run through internal/qemuimg, which the libvirt
// backend shares; these names keep the package's own vocabulary.
type (
	// cmdError is a failed qemu or qemu-img run: only ever a cause.
	cmdError = qemuimg.CmdError
	// missingBinary is a qemu binary that is not installed; errors.go
	// maps it to Unavailable, since nothing in the context can work
	// without it.
	missingBinary = qemuimg.MissingBinary
	// imageInfo is what qemu-img info says of an image.
	imageInfo = qemuimg.Info
)

// img is the backend's qemu-img (Options.QEMUImgPath).
func (b *Backend) img() qemuimg.Tool { return qemuimg.Tool(b.opts.QEMUImgPath) }
