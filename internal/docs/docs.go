// Package docs holds the tests that keep README.md true: its client
// configurations identical to the files under examples/, which the
// end-to-end suite runs (readme_test.go), and the package layering of "How
// it is built" true of the import graph, each rule shown to bite
// (layers_test.go).
package docs
