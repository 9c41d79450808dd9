package cli

// unprotectedNested is set only by the test-only build tag
// rootfs_control_nested (control_nested.go); see writtenSet.
var unprotectedNested = false
