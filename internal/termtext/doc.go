// Package termtext makes text from outside safe to print: on one line of a
// terminal or of a shell comment (no control characters, clipped), or
// single-quoted as one word of a POSIX shell. Every command that prints what
// a sidecar or a file said goes through it.
package termtext
