// Package buildinfo is what a colocd binary knows of its own build: the
// release (the -X version, else the module's) as the SemVer the NATS micro
// service needs, the commit and whether the tree was modified, and the Go
// version and platform.
package buildinfo
