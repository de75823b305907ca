package kubevirt

// Seams for the tests of package kubevirt_test.
var (
	MapError         = mapError
	PatchRunStrategy = (*Backend).patchRunStrategy
)
