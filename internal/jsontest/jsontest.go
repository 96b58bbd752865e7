// Package jsontest reads, in tests, a value back from the JSON a command's
// --json prints: what a script that decodes the output gets.
package jsontest

import (
	"encoding/json"
	"testing"
)

// RoundTrip encodes v as JSON and decodes that into a T, failing t if
// either fails (with the JSON, when it does not decode).
func RoundTrip[T any](t testing.TB, v any) T {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back T
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("decode %T: %v\n%s", back, err, out)
	}
	return back
}
