// Command colocd is the co-location sidecar and its offline tools: profile
// import, latency prediction and calibration.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/colocd/colocd/launch"
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			cancel(launch.SignalCause{Signal: s.(syscall.Signal)})
		}
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(sigs)
	code := exitCode(err)
	// A command that a signal cut short exits 128+N, as a shell reports
	// it, unless it chose its own status (run: its command's). One that
	// stopped cleanly on it (serve) exits 0.
	var sc launch.SignalCause
	var se statusError
	if c := context.Cause(ctx); err != nil && errors.As(c, &sc) && !errors.As(err, &se) {
		code = 128 + int(sc.Signal)
		if errors.Is(err, context.Canceled) {
			err = statusError{code: code, err: fmt.Errorf("interrupted (%s)", sc)}
		}
	}
	if err != nil {
		if !silent(err) {
			fmt.Fprintln(os.Stderr, "colocd:", err)
		}
		os.Exit(code)
	}
}
