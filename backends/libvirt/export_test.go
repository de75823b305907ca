package libvirt

// Exported for the table tests in libvirt_test, which check the mappings
// without a libvirt connection.
var (
	StateOf       = stateOf
	MapError      = mapError
	ConsistencyOf = consistencyOf
	ToMiB         = toMiB
)
