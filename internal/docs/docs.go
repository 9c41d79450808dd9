// Package docs holds the test that keeps README.md's client configurations
// identical to the files under examples/, which the end-to-end suite runs.
package docs
