package launch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/fleet"
	"github.com/colocd/colocd/internal/proc"
	"github.com/colocd/colocd/internal/syncio"
)

// Result is how run ended.
type Result struct {
	// Status is run's exit status: the command's own, 128+N after signal
	// N, ExitDenied, ExitRevoked or ExitLeaseLost.
	Status int
	// Restarts counts the command's restarts (throttles, raises taken,
	// re-admissions).
	Restarts int
}

// SignalCause is the cause (context.Cause) of a context ended by a signal
// to run: the signal is forwarded to the command and run exits 128+N.
type SignalCause struct{ Signal syscall.Signal }

func (s SignalCause) Error() string { return signalName(s.Signal) + " received" }

// DeniedError is a request for a slot answered with no (after
// WaitForSlot, if set): the command never started.
type DeniedError struct{ Decision *v1.Decision }

func (e *DeniedError) Error() string {
	return fmt.Sprintf("denied (%s): %s", e.Decision.Reason.Code, oneLine(e.Decision.Reason.Message))
}

// envRestarts is how many times the supervisor restarted the command; it
// also sets or withholds EnvLease, EnvSidecar and EnvToken.
const envRestarts = "COLOCD_RUN_RESTARTS"

// Run owns one lease for the life of one command: it asks with admit,
// runs cfg.Command under the lease and follows it (docs/cli.md#run). It
// returns the exit status run should end with; an error is a failure that
// is neither the command's nor a deny (the command never started, or
// could not be started again), or a *DeniedError.
func Run(ctx context.Context, cfg Config, c Client, admit Admitter) (Result, error) {
	if err := cfg.fill(); err != nil {
		return Result{Status: 2}, err
	}
	// The command's output and run's lines may go to one writer: writes
	// to it are serialised (a pipe's copy runs beside run's own lines). A
	// file (stderr) is handed to the command as it is, so that it keeps
	// its terminal.
	if _, isFile := cfg.Log.(*os.File); cfg.Log != nil && !isFile {
		lw := &syncio.Writer{W: cfg.Log}
		if cfg.Stderr == cfg.Log {
			cfg.Stderr = lw
		}
		if cfg.Stdout == cfg.Log {
			cfg.Stdout = lw
		}
		cfg.Log = lw
	}
	s := &supervisor{cfg: cfg, c: c, admit: admit, procs: proc.Table{}, uid: os.Getuid(),
		rep: &reporter{w: cfg.Log, asJSON: cfg.JSON, hook: cfg.OnRecord}}
	return s.run(ctx)
}

type supervisor struct {
	cfg   Config
	c     Client
	admit Admitter
	rep   *reporter
	procs proc.Table
	uid   int // this process's user: the command's

	// The lease held.
	sidecar, jobID string
	ref            v1.LeaseRef
	expires        time.Time
	pct            int // the percentage the command runs at (0: none, time slicing or a MIG instance)
	env            map[string]string
	restarts       int
	// startedLow: the lease was granted at its min_pct until the sidecar
	// had measured its servers (measure_first); its first raise is taken
	// even without TakeRaises.
	startedLow bool

	child      *child
	registered []procKey        // what the last register named
	regSince   time.Time        // a register is owed since (a start); zero: none
	notGPU     map[procKey]bool // refused by the sidecar as no GPU process of ours
	// notYet are processes refused while they held no GPU device open
	// (the command before its CUDA context): they are named again once
	// they open one.
	notYet   map[procKey]bool
	fallback bool   // the last gpuProcs named the command for want of a GPU process
	regErr   string // the last register failure reported
	overCap  bool   // more GPU processes than Processes were seen (said once)
}

type procKey struct {
	pid   int
	start uint64
}

// outcome is how holding a lease ended.
type outcome int

const (
	endExited   outcome = iota // the command exited by itself
	endSignaled                // run was told to stop
	endRevoked                 // the sidecar revoked the lease
	endLost                    // the lease expired, or could not be renewed
)

func (s *supervisor) run(ctx context.Context) (Result, error) {
	patient := s.cfg.WaitForSlot > 0
	for first := true; ; first = false {
		if !first {
			s.emit(Record{Event: "readmitting", Message: "asking for a new lease"})
		}
		g, err := s.acquire(ctx, patient, !first)
		if err != nil {
			var de *DeniedError
			if errors.As(err, &de) {
				return Result{Status: ExitDenied, Restarts: s.restarts}, err
			}
			if cause, ok := context.Cause(ctx).(SignalCause); ok {
				return Result{Status: 128 + int(cause.Signal), Restarts: s.restarts}, nil
			}
			return Result{Status: 1, Restarts: s.restarts}, err
		}
		if !first {
			s.restarts++
		}
		if err := s.checkUser(g); err != nil {
			s.release(time.Now(), endExited) // the command never started
			return Result{Status: 1, Restarts: s.restarts}, err
		}
		end, status, exitAt, err := s.hold(ctx, g)
		s.release(exitAt, end)
		switch {
		case err != nil:
			// As a shell says it: 127 no such command, 126 not runnable.
			code := 1
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
				code = 127
			} else if errors.Is(err, fs.ErrPermission) {
				code = 126
			}
			return Result{Status: code, Restarts: s.restarts}, err
		case end == endExited:
			return Result{Status: status, Restarts: s.restarts}, nil
		case end == endSignaled:
			return Result{Status: status, Restarts: s.restarts}, nil
		case s.cfg.Readmit && ctx.Err() == nil:
			continue
		case end == endRevoked:
			return Result{Status: ExitRevoked, Restarts: s.restarts}, nil
		default:
			return Result{Status: ExitLeaseLost, Restarts: s.restarts}, nil
		}
	}
}

// acquire asks for a lease until granted: once, or while patient (or
// forever when readmitting without a WaitForSlot bound) after a deny, a
// 503 or no sidecar, with backoff and jitter.
func (s *supervisor) acquire(ctx context.Context, patient, readmit bool) (*Grant, error) {
	var until time.Time
	if s.cfg.WaitForSlot > 0 {
		until = time.Now().Add(s.cfg.WaitForSlot)
	}
	wait := s.cfg.backoff
	for {
		g, err := s.admit(ctx)
		if err == nil && g.Decision != nil && g.Decision.Decision != v1.DecisionDeny {
			if g.Decision.Lease == nil {
				return nil, fmt.Errorf("admit: a %s from %s with no lease", g.Decision.Decision, g.Sidecar)
			}
			s.take(g)
			return g, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		var why string
		switch {
		case err == nil && g.Decision != nil:
			why = fmt.Sprintf("denied (%s): %s", g.Decision.Reason.Code, g.Decision.Reason.Message)
			err = &DeniedError{Decision: g.Decision}
		case err == nil:
			return nil, errors.New("admit: no decision")
		case retryable(err):
			why = err.Error()
		default:
			return nil, err
		}
		if !(patient || readmit) || (!until.IsZero() && time.Now().Add(wait).After(until)) {
			return nil, err
		}
		pause := wait/2 + rand.N(wait/2+1)
		var be *v1.Error
		if errors.As(err, &be) && be.RetryAfter > pause {
			pause = be.RetryAfter // the sidecar said when
		}
		msg := fmt.Sprintf("%s; asking again in %s", why, pause.Round(100*time.Millisecond))
		if !until.IsZero() {
			msg += fmt.Sprintf(" (waiting until %s)", until.Format(time.TimeOnly))
		}
		s.emit(Record{Event: "waiting", Message: msg})
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		wait = min(wait*2, time.Minute)
	}
}

// checkUser refuses a grant on a GPU whose MPS server serves another user
// than this process's (and so the command's): an MPS server serves one
// user, and a CUDA process of another waits at CUDA init until every
// client of that server (the inference server's among them) has exited.
func (s *supervisor) checkUser(g *Grant) error {
	l := g.Decision.Lease
	if l.MPSServerUID == nil || *l.MPSServerUID == s.uid {
		return nil
	}
	return fmt.Errorf("run: lease %s: the MPS server on %s serves uid %d, and this process runs as uid %d: "+
		"a CUDA process of another user than the server's waits at CUDA init until every client of that server has exited, "+
		"so %s would hang there: run colocd run as uid %d (docs/mps.md#one-user)", l.ID, g.Sidecar, *l.MPSServerUID, s.uid, s.cfg.Command[0], *l.MPSServerUID)
}

// retryable reports an admit error that waiting may cure: a sidecar not
// ready or busy (503, 429 past the launcher's rate), a deadline, no
// answer.
func retryable(err error) bool {
	switch v1.CodeOf(err) {
	case v1.CodeUnavailable, v1.CodeTimeout, v1.CodeTooManyRequests:
		return true
	}
	return errors.Is(err, v1.ErrNoSidecar) || errors.Is(err, v1.ErrNoAnswer) || errors.Is(err, fleet.ErrEveryOfferLost) ||
		errors.Is(err, fleet.ErrEveryQuoteDenied)
}

// take makes g's lease the one held.
func (s *supervisor) take(g *Grant) {
	l := g.Decision.Lease
	s.sidecar, s.jobID = g.Sidecar, l.JobID
	s.ref = v1.LeaseRef{LeaseID: l.ID, Token: l.Token}
	s.expires, s.pct, s.env = l.ExpiresAt, l.ActiveThreadPct, l.Env
	s.startedLow = g.Decision.Reason.Code == v1.ReasonMeasureFirst
	if l.Instance != nil {
		s.pct = 0
	}
	s.registered, s.notGPU, s.notYet, s.regErr = nil, map[procKey]bool{}, map[procKey]bool{}, ""
	on := fmt.Sprintf("at %d %%", l.ActiveThreadPct)
	if l.Instance != nil {
		on = "on MIG instance " + l.Instance.UUID
	}
	exp := l.ExpiresAt
	s.emit(Record{Event: "admitted", Pct: s.pct, ExpiresAt: &exp,
		Message: fmt.Sprintf("%s (%s) on %s %s: lease %s until %s", g.Decision.Decision, g.Decision.Reason.Code, g.Sidecar, on, l.ID, l.ExpiresAt.Format(time.RFC3339))})
}

// hold runs the command under the lease until it ends: the command's exit
// (its status, and when it exited), a signal to run, a revoke, or the
// lease lost.
func (s *supervisor) hold(ctx context.Context, g *Grant) (outcome, int, time.Time, error) {
	// The renewer outlives ctx's end: the lease must hold while the
	// command is being stopped, until the release.
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer rcancel()
	ren := startRenewer(rctx, s.c, s.sidecar, s.ref, s.expires, s.cfg.Grace+5*time.Second)
	defer func() { rcancel(); <-ren.done }()

	evs := followEvents(rctx, s.c, s.sidecar, s.jobID)
	defer evs.stop()

	if err := s.start(); err != nil {
		return endExited, 1, time.Now(), err
	}
	tick := time.NewTicker(s.cfg.RegisterEvery)
	defer tick.Stop()
	paused := false // stopped before an unrenewed expiry, waiting for a renew
	for {
		var childDone <-chan struct{}
		if s.child != nil && !paused {
			childDone = s.child.done
		}
		select {
		case <-childDone:
			at := time.Now()
			st := s.child.status
			s.reapGroup()
			s.emit(Record{Event: "exited", Status: &st, Message: fmt.Sprintf("%s exited with status %d", s.cfg.Command[0], st)})
			return endExited, st, at, nil

		case <-ctx.Done():
			sig := syscall.SIGTERM
			if c, ok := context.Cause(ctx).(SignalCause); ok {
				sig = c.Signal
			}
			s.emit(Record{Event: "interrupted", Message: fmt.Sprintf("%s: forwarding it to %s, waiting up to %s", signalName(sig)+" received", s.cfg.Command[0], s.cfg.Grace)})
			if s.child != nil {
				s.child.stop(sig, s.cfg.Grace)
			}
			return endSignaled, 128 + int(sig), time.Now(), nil

		case rec := <-evs.out:
			if end, stop := s.onEvent(rec, paused); stop {
				return end, 0, time.Now(), nil
			}

		case l := <-ren.renewed:
			s.expires = l.ExpiresAt
			if paused && time.Now().Before(l.ExpiresAt) {
				paused = false
				s.emit(Record{Event: "renewed", Message: fmt.Sprintf("lease renewed again until %s: starting %s again", l.ExpiresAt.Format(time.RFC3339), s.cfg.Command[0])})
				s.restarts++
				if err := s.start(); err != nil {
					return endExited, 1, time.Now(), err
				}
				continue
			}
			s.onRenewed(l)

		case exp := <-ren.atRisk:
			if paused || s.child == nil {
				continue
			}
			grace := min(s.cfg.Grace, time.Until(exp)-2*time.Second)
			s.emit(Record{Event: "stopping", ExpiresAt: &exp,
				Message: fmt.Sprintf("cannot renew the lease, which ends in %s: stopping %s so that it does not run past it", until(exp), s.cfg.Command[0])})
			s.child.stop(syscall.SIGTERM, grace)
			paused = true

		case err := <-ren.lost:
			if s.child != nil && !s.child.exited() {
				s.child.stop(syscall.SIGTERM, min(s.cfg.Grace, 5*time.Second))
			}
			if errors.Is(err, errRevoked) {
				s.emit(Record{Event: "revoked", Message: fmt.Sprintf("lease %s was revoked: %v", s.ref.LeaseID, err)})
				return endRevoked, 0, time.Now(), nil
			}
			s.emit(Record{Event: "lease_lost", Message: fmt.Sprintf("lease %s is lost: %v", s.ref.LeaseID, err)})
			return endLost, 0, time.Now(), nil

		case <-tick.C:
			if !paused {
				s.register(false)
			}
		}
	}
}

// onEvent acts on one of the job's events; stop says the lease is over.
func (s *supervisor) onEvent(rec bus.EventRecord, paused bool) (outcome, bool) {
	ev := rec.Event
	if ev.LeaseID != s.ref.LeaseID {
		return 0, false // an earlier lease of the same job
	}
	switch ev.Type {
	case v1.EventThrottle:
		s.move("throttled", ev.ActiveThreadPct, ev.Env, ev.Deadline, paused)
	case v1.EventRaise:
		// A job started at its min_pct only until measured takes its first
		// raise: it is the percentage the job was to have.
		first := s.startedLow && ev.ActiveThreadPct > s.pct
		if !s.cfg.TakeRaises && !first {
			if ev.ActiveThreadPct != s.pct {
				s.emit(Record{Event: "raise_ignored", Pct: s.pct, Message: fmt.Sprintf("raise %d→%d %% offered: ignored (run with --take-raises to restart at it)", s.pct, ev.ActiveThreadPct)})
			}
			return 0, false
		}
		s.startedLow = false
		s.move("raised", ev.ActiveThreadPct, ev.Env, nil, paused)
	case v1.EventRevoke:
		grace := s.cfg.Grace
		if ev.Deadline != nil {
			grace = min(grace, time.Until(*ev.Deadline)-time.Second)
		}
		s.emit(Record{Event: "revoked", Deadline: ev.Deadline, Message: fmt.Sprintf("revoked (deadline %s): %s: stopping %s", deadlineText(ev.Deadline), ev.Reason, s.cfg.Command[0])})
		if s.child != nil {
			s.child.stop(syscall.SIGTERM, grace)
		}
		return endRevoked, true
	case v1.EventExpire:
		s.emit(Record{Event: "expired", Message: fmt.Sprintf("lease %s expired: %s: stopping %s", s.ref.LeaseID, ev.Reason, s.cfg.Command[0])})
		if s.child != nil {
			s.child.stop(syscall.SIGTERM, min(s.cfg.Grace, 5*time.Second))
		}
		return endLost, true
	}
	return 0, false
}

// onRenewed notes a renew's answer: a percentage that moved without its
// event (missed, or still to come) is acted on the same way.
func (s *supervisor) onRenewed(l *v1.Lease) {
	if l.Instance != nil || s.pct == 0 || l.ActiveThreadPct == s.pct || l.ActiveThreadPct == 0 {
		return
	}
	if l.ActiveThreadPct < s.pct {
		s.move("throttled", l.ActiveThreadPct, l.Env, nil, false)
	} else if s.cfg.TakeRaises {
		s.move("raised", l.ActiveThreadPct, l.Env, nil, false)
	}
}

// move restarts the command at a new percentage: stop it (by the
// throttle action, within the deadline), start it with the new env,
// register it.
func (s *supervisor) move(kind string, pct int, env map[string]string, deadline *time.Time, paused bool) {
	if pct == s.pct || pct <= 0 {
		return // already there: a throttle to where the command runs has nothing to restart
	}
	got := time.Now()
	from := s.pct
	how := "restarting"
	if s.cfg.OnThrottle.Signal != 0 {
		how = "sending " + signalName(s.cfg.OnThrottle.Signal) + ", then restarting"
	}
	s.emit(Record{Event: kind, FromPct: from, Pct: pct, Deadline: deadline,
		Message: fmt.Sprintf("%s %d→%d %% (deadline %s): %s", kind, from, pct, deadlineText(deadline), how)})
	s.pct = pct
	if env != nil {
		s.env = env
	}
	if paused || s.child == nil {
		return // started at the new percentage once the lease is renewed
	}
	s.stopForRestart(deadline)
	s.restarts++
	if err := s.start(); err != nil {
		s.emit(Record{Event: "start_failed", Message: err.Error()})
		return
	}
	secs := time.Since(got).Seconds()
	s.emit(Record{Event: "restarted", Pct: pct, FromPct: from, PIDs: []int{s.child.pid}, Seconds: &secs,
		Message: fmt.Sprintf("restarted %s at %d %% (pid %d, restart %d)", s.cfg.Command[0], pct, s.child.pid, s.restarts)})
}

// stopForRestart stops the command for a restart, leaving time before the
// deadline to start it again and register it.
func (s *supervisor) stopForRestart(deadline *time.Time) {
	budget := s.cfg.Grace
	if deadline != nil {
		left := time.Until(*deadline)
		budget = min(budget, left-min(15*time.Second, left/4))
	}
	if sig := s.cfg.OnThrottle.Signal; sig != 0 {
		// The command checkpoints and exits by itself; it gets the budget
		// less a short last grace for SIGTERM.
		last := min(5*time.Second, budget/4)
		_ = s.child.signal(sig)
		t := time.NewTimer(max(budget-last, 0))
		select {
		case <-s.child.done:
		case <-t.C:
		}
		t.Stop()
		s.child.stop(syscall.SIGTERM, last)
		return
	}
	s.child.stop(syscall.SIGTERM, budget)
}

func deadlineText(d *time.Time) string {
	if d == nil {
		return "none"
	}
	return until(*d)
}

// start starts the command with the lease's environment and registers it.
func (s *supervisor) start() error {
	c, err := startChild(s.cfg.Command, s.childEnv(), s.cfg.Dir, s.cfg.Stdin, s.cfg.Stdout, s.cfg.Stderr)
	if err != nil {
		return err
	}
	s.child = c
	s.registered, s.regSince = nil, time.Now()
	s.emit(Record{Event: "started", Pct: s.pct, PIDs: []int{c.pid}, Message: fmt.Sprintf("started %s (pid %d)%s", s.cfg.Command[0], c.pid, pctText(s.pct))})
	s.register(true)
	return nil
}

func pctText(pct int) string {
	if pct == 0 {
		return ""
	}
	return fmt.Sprintf(" at %d %%", pct)
}

// childEnv is the command's environment: the base without any lease
// variables of an earlier admit, then the lease's, the sidecar and the
// restart count; the token only when asked.
func (s *supervisor) childEnv() []string {
	var env []string
	for _, kv := range s.cfg.Env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CUDA_MPS_") || strings.HasPrefix(k, "COLOCD_LEASE_") || k == EnvSidecar || k == envRestarts {
			continue
		}
		if _, ok := s.env[k]; ok {
			continue
		}
		env = append(env, kv)
	}
	keys := make([]string, 0, len(s.env))
	for k := range s.env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+s.env[k])
	}
	if _, ok := s.env[EnvLease]; !ok {
		env = append(env, EnvLease+"="+s.ref.LeaseID)
	}
	env = append(env, EnvSidecar+"="+s.sidecar, envRestarts+"="+strconv.Itoa(s.restarts))
	if s.cfg.PassToken {
		env = append(env, EnvToken+"="+s.ref.Token)
	}
	return env
}

// register tells the sidecar the command's GPU processes: those of its
// process tree that hold an NVIDIA device open, or, while none does, the
// command itself; when they changed since the last register, or force.
func (s *supervisor) register(force bool) {
	if s.child == nil || s.child.exited() {
		return
	}
	for try := 0; try < 3; try++ {
		keys := s.gpuProcs()
		if len(keys) == 0 || (!force && slices.Equal(keys, s.registered)) {
			return
		}
		pids := make([]int, len(keys))
		for i, k := range keys {
			pids[i] = k.pid
		}
		ctx, cancel := context.WithTimeout(context.Background(), renewTry)
		err := s.c.Register(ctx, s.sidecar, &v1.RegisterRequest{LeaseID: s.ref.LeaseID, Token: s.ref.Token, PIDs: pids})
		cancel()
		if err == nil {
			s.registered, s.regErr = keys, ""
			rec := Record{Event: "registered", Pct: s.pct, PIDs: pids, Message: fmt.Sprintf("registered pids %v", pids)}
			if !s.regSince.IsZero() {
				secs := time.Since(s.regSince).Seconds()
				rec.Seconds = &secs
				s.regSince = time.Time{}
			}
			s.emit(rec)
			return
		}
		// A process the sidecar says is not a GPU process of ours (not on
		// the GPU yet, a forked helper): leave it out and try the rest.
		if v1.CodeOf(err) == v1.CodeBadRequest {
			if m := pidField.FindStringSubmatch(err.Error()); m != nil {
				if i, _ := strconv.Atoi(m[1]); i < len(keys) {
					if s.fallback {
						// Not on the GPU yet: named again once it opens a
						// device, as a real GPU refuses a process with no
						// CUDA context.
						s.notYet[keys[i]] = true
						s.emit(Record{Event: "register_failed", PIDs: []int{keys[i].pid},
							Message: fmt.Sprintf("pid %d left out of the register until it opens the GPU: %v", keys[i].pid, err)})
						return
					}
					s.notGPU[keys[i]] = true
					s.emit(Record{Event: "register_failed", PIDs: []int{keys[i].pid},
						Message: fmt.Sprintf("pid %d left out of the register while it lives: %v", keys[i].pid, err)})
					continue
				}
			}
		}
		if msg := err.Error(); msg != s.regErr {
			s.regErr = msg
			s.emit(Record{Event: "register_failed", Message: fmt.Sprintf("register pids %v: %v (trying again every %s)", pids, err, s.cfg.RegisterEvery)})
		}
		return
	}
}

// pidField finds the index a register's 400 names.
var pidField = regexp.MustCompile(`pids\[(\d+)\]`)

// gpuProcs reads the command's process tree and picks what to register.
func (s *supervisor) gpuProcs() []procKey {
	all, err := s.procs.List()
	root := procKey{pid: s.child.pid}
	s.fallback = false
	if err != nil {
		s.fallback = true
		return []procKey{root}
	}
	t := tree(all, s.child.pid)
	var gpu []procKey
	live := map[procKey]bool{}
	for _, p := range t {
		k := procKey{p.PID, p.StartTicks}
		live[k] = true
		if p.PID == s.child.pid {
			root = k
		}
		if !s.notGPU[k] && s.procs.HasOpen(p.PID, gpuDevices) {
			gpu = append(gpu, k)
		}
	}
	for _, m := range []map[procKey]bool{s.notGPU, s.notYet} {
		for k := range m {
			if !live[k] {
				delete(m, k) // gone: its id may come back as another process
			}
		}
	}
	if len(gpu) == 0 {
		if s.notGPU[root] || s.notYet[root] {
			return nil
		}
		s.fallback = true
		return []procKey{root}
	}
	if len(gpu) > s.cfg.Processes {
		if !s.overCap {
			s.overCap = true
			s.emit(Record{Event: "register_failed", Message: fmt.Sprintf("%d processes of %s use the GPU, but the job was admitted with %d: registering the first %d (admit with --processes %d)",
				len(gpu), s.cfg.Command[0], s.cfg.Processes, s.cfg.Processes, len(gpu))})
		}
		gpu = gpu[:s.cfg.Processes]
	}
	return gpu
}

// reapGroup ends what is left of the command's process group after the
// command exited: SIGTERM, a second, then SIGKILL.
func (s *supervisor) reapGroup() {
	if s.child == nil || !s.child.groupAlive() {
		return
	}
	_ = s.child.signal(syscall.SIGTERM)
	for end := time.Now().Add(time.Second); time.Now().Before(end) && s.child.groupAlive(); {
		time.Sleep(20 * time.Millisecond)
	}
	_ = s.child.signal(syscall.SIGKILL)
}

// release gives the lease back (after any end: a revoked or lost lease is
// over already, and a release of it only confirms), a few tries within
// releaseWithin.
func (s *supervisor) release(exitAt time.Time, end outcome) {
	within := releaseWithin
	if end == endLost || end == endRevoked {
		within = 2 * time.Second // over already: one short try
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var err error
	for try := 0; try < 3; try++ {
		err = s.c.Release(ctx, s.sidecar, &s.ref)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	secs := time.Since(exitAt).Seconds()
	switch {
	case err == nil:
		s.emit(Record{Event: "released", Seconds: &secs, Message: fmt.Sprintf("lease %s released", s.ref.LeaseID)})
	case end != endExited && end != endSignaled && (v1.CodeOf(err) == v1.CodeNotFound || v1.CodeOf(err) == v1.CodeConflict):
		// Over already: nothing to give back.
	default:
		s.emit(Record{Event: "release_failed", Message: fmt.Sprintf("release lease %s: %v (it ends by itself at %s)", s.ref.LeaseID, err, s.expires.Format(time.RFC3339))})
	}
}

// releaseWithin bounds the release at the end.
const releaseWithin = 10 * time.Second

func (s *supervisor) emit(r Record) {
	if r.Sidecar == "" {
		r.Sidecar = s.sidecar
	}
	if r.LeaseID == "" {
		r.LeaseID = s.ref.LeaseID
	}
	r.Restarts = s.restarts
	s.rep.emit(r)
}

// eventFollower follows the job's events through the sidecar's watch,
// resuming after the last sequence seen when the subscription ends (a
// sidecar restart, a NATS outage: bus.EventSubscription resumes by itself
// while the sidecar answers; this covers a subscription that gave up).
type eventFollower struct {
	c            Client
	sidecar, job string
	out          chan bus.EventRecord
	cancel       context.CancelFunc
	done         chan struct{}
}

// followEvents subscribes from sequence 1 (the job's events kept; the
// caller keeps those of its lease) until stop.
func followEvents(ctx context.Context, c Client, sidecar, job string) *eventFollower {
	ctx, cancel := context.WithCancel(ctx)
	f := &eventFollower{c: c, sidecar: sidecar, job: job, out: make(chan bus.EventRecord), cancel: cancel, done: make(chan struct{})}
	go f.pump(ctx)
	return f
}

// pump subscribes (again, after each end, a second later) and forwards
// records, keeping the next sequence to ask for.
func (f *eventFollower) pump(ctx context.Context) {
	defer close(f.done)
	next := uint64(1)
	for {
		if sub, err := f.c.Events(ctx, f.sidecar, f.job, next); err == nil {
			for rec := range sub.C() {
				next = rec.Seq + 1
				select {
				case f.out <- rec:
				case <-ctx.Done():
				}
				if ctx.Err() != nil {
					break
				}
			}
			_ = sub.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// stop ends the subscription and waits for it.
func (f *eventFollower) stop() {
	f.cancel()
	<-f.done
}
