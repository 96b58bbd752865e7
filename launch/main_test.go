package launch

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The test binary is also the command that run supervises: with
// COLOCD_TEST_CHILD=1 it acts as a training job (childMain) instead of
// running the tests.
func TestMain(m *testing.M) {
	if os.Getenv("COLOCD_TEST_CHILD") == "1" {
		childMain()
		return
	}
	os.Exit(m.Run())
}

// childMain is a small training job: it appends what it started with, and
// each signal it gets, to CHILD_LOG; it exits with CHILD_EXIT after
// CHILD_SLEEP (default: never by itself); SIGUSR1 is a checkpoint request,
// after which it exits 0, and SIGTERM or SIGINT end it with 0 too. With
// CHILD_SPAWN=1 it first starts a copy of itself as a worker (a
// descendant, as torchrun's workers are), which only waits.
func childMain() {
	logf := func(format string, args ...any) {
		f, err := os.OpenFile(os.Getenv("CHILD_LOG"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			os.Exit(99)
		}
		fmt.Fprintf(f, format+"\n", args...)
		f.Close()
	}
	_, hasToken := os.LookupEnv("COLOCD_LEASE_TOKEN")
	if os.Getenv("CHILD_WORKER") == "1" {
		logf("worker pid=%d", os.Getpid())
		select {}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	logf("start pid=%d pct=%s restarts=%s lease=%s token=%v pipe=%s", os.Getpid(), os.Getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
		os.Getenv("COLOCD_RUN_RESTARTS"), os.Getenv("COLOCD_LEASE_ID"), hasToken, os.Getenv("CUDA_MPS_PIPE_DIRECTORY"))
	if os.Getenv("CHILD_SPAWN") == "1" {
		p, err := os.StartProcess(os.Args[0], os.Args, &os.ProcAttr{Env: append(os.Environ(), "CHILD_WORKER=1"), Files: []*os.File{nil, os.Stdout, os.Stderr}})
		if err == nil {
			go p.Wait()
		}
	}
	var after <-chan time.Time
	if d, err := time.ParseDuration(os.Getenv("CHILD_SLEEP")); err == nil {
		after = time.After(d)
	}
	code, _ := strconv.Atoi(os.Getenv("CHILD_EXIT"))
	select {
	case <-after:
		logf("exit pid=%d code=%d", os.Getpid(), code)
		os.Exit(code)
	case s := <-sigs:
		logf("signal pid=%d sig=%s", os.Getpid(), s)
		os.Exit(0)
	}
}
