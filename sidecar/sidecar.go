package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/gpu"
	"github.com/colocd/colocd/internal/frontdoor"
	"github.com/colocd/colocd/mps"
	"github.com/colocd/colocd/predictor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"
)

// Options are what a caller (the command, a test) adds to the configuration.
type Options struct {
	Logger *slog.Logger
	// Version is reported by the micro service and the traces.
	Version string
	// ConfigPath, when set, is watched: SLO and admission changes apply live.
	ConfigPath string
	// Overrides are the command line's values, re-applied on every reload.
	Overrides map[string]any
	// TracerProvider replaces the exporter the configuration picks (tests).
	TracerProvider trace.TracerProvider
	// NATSOptions are added to the connection (tests).
	NATSOptions []nats.Option
	// MPSProcDir is the proc file system the MPS servers' users are read
	// from (tests: the fake control daemon's); empty: /proc.
	MPSProcDir string
}

// Sidecar is one running colocd: every component built from the
// configuration, ready to Run.
type Sidecar struct {
	cfg     *configs.Config
	opts    Options
	log     *slog.Logger
	id      string
	tel     *Telemetry
	gpu     gpu.Handle
	gpuInfo gpu.Info
	sim     simDevice // a simulated GPU and daemon, shown the leases
	daemon  mpsDaemon
	model   *admission.Model
	adm     *admission.Controller
	embed   *natsserver.Embedded
	// names maps the launcher identities of the moment, by public key, to
	// their names (launchers.go).
	names   atomic.Pointer[map[string]string]
	nc      *nats.Conn
	profs   *bus.ProfileStore // profiles sent by reference
	js      jetstream.JetStream
	store   *kvStore
	service *bus.Service
	http    *httpServer
	watcher *configs.Watcher
	// replicas is how many copies of each bucket and stream the sidecar
	// keeps: nats.replicas, or what 0 (auto) chose.
	replicas int
	// applyRejected is the last reload the controller refused (nil after
	// one it applied); the watcher keeps the file's own rejections.
	applyRejected atomic.Pointer[configs.Rejection]
	checks        Checks
	degraded      Checks // told in /readyz, not failing it
	// learnedSaved marks the learned response last saved (learned.go);
	// the guard loop's alone once it runs.
	learnedSaved [2]int
	// drainErr is the drain file's last read error said (drain.go).
	drainErr string
	// serving is what the requests tell of readiness (serving.go).
	serving servingHealth
	// viewMu orders afterLeaseChange's reads of the leases with what it
	// shows of them.
	viewMu sync.Mutex

	mu      sync.Mutex
	specs   []admission.ServiceSpec
	watched *watchedServices // the services' own metrics (observers.go)
	fleet   *fleetPublisher  // the capacity summary (fleet.go)
	// observations records the measured windows in the data dir (records.go).
	observations *observationLog
	closers      []func(context.Context) error
}

// New builds every component from cfg (which must be valid) and starts
// what must be up before the first request: the GPU, the MPS daemon (in MPS
// mode), NATS (embedded or remote), the lease store, and the controller with
// the leases it had. On error, what was started is stopped again.
func New(ctx context.Context, cfg *configs.Config, opts Options) (_ *Sidecar, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "0.0.0-dev"
	}
	s := &Sidecar{cfg: cfg, opts: opts, log: opts.Logger, sim: simDevice{log: opts.Logger}}
	defer func() {
		if err != nil {
			s.Close(context.Background())
		}
	}()
	if err := s.openGPU(ctx); err != nil {
		return nil, err
	}
	s.id = cfg.Sidecar.ID
	if s.id == "" {
		s.id = s.gpuInfo.UUID
	}
	if err := v1.ValidateSidecarID(s.id); err != nil {
		return nil, fmt.Errorf("sidecar.id: %w", err)
	}
	if s.tel, err = NewTelemetry(ctx, cfg.Telemetry.Tracing, opts.Version, s.id, opts.TracerProvider); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.tel.Shutdown)
	if cfg.Sharing.Mode == configs.ModeMPS {
		if err := s.openMPS(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.openModel(); err != nil {
		return nil, err
	}
	js, err := s.openNATS(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.openAdmission(ctx, js); err != nil {
		return nil, err
	}
	s.restoreLearned()
	if err := s.tel.metrics.observeLearned(s.adm.Response); err != nil {
		return nil, err
	}
	if err := s.openFleet(ctx); err != nil {
		return nil, err
	}
	// Drained before the API serves a single admit.
	s.applyDrain(ctx)
	s.checks = s.readiness()
	if err := s.tel.metrics.observeReadiness(s.checks); err != nil {
		return nil, err
	}
	if err := s.tel.metrics.observeGPU(s.gpu, s.adm.Leases); err != nil {
		return nil, err
	}
	if err := s.tel.metrics.observeIdentities(s.adm.Leases, s.registeredIdentities); err != nil {
		return nil, err
	}
	s.degraded = Checks{"draining": s.checkDrain}
	if door := s.frontDoor(); door != nil {
		s.degraded["nats_front_door"] = door.Saturated
		if err := s.tel.metrics.observeFrontDoor(door); err != nil {
			return nil, err
		}
	}
	if s.service, err = bus.Serve(s.nc, s.id, opts.Version, &handler{s: s, profiles: newProfileCache(profileCacheBytes)}, bus.WithFleetDomain(s.hubDomain()), bus.WithEventsDomain(s.eventsDomain()),
		bus.WithLimits(cfg.NATS.Limits), bus.WithLogger(s.log.With("component", "api")), bus.WithFloodHandler(s.onFlood)); err != nil {
		return nil, fmt.Errorf("serve nats api: %w", err)
	}
	// Run stops it first; a sidecar that never ran stops it on Close.
	s.closers = append(s.closers, func(context.Context) error { return s.service.Stop() })
	if s.http, err = listenHTTP(cfg.Telemetry.HTTP, newMux(s.checks, s.degraded, s.tel.Registry)); err != nil {
		return nil, fmt.Errorf("telemetry.http %s: %w", cfg.Telemetry.HTTP, err)
	}
	if opts.ConfigPath != "" {
		if s.watcher, err = configs.NewWatcher(opts.ConfigPath, configs.WatchOptions{Overrides: opts.Overrides, Logger: s.log.With("component", "config")}); err != nil {
			return nil, err
		}
	}
	s.afterLeaseChange()
	s.log.Info("colocd ready", "sidecar", s.id, "gpu", s.gpuInfo.Name, "backend", s.gpuInfo.Backend, "mode", cfg.Sharing.Mode,
		"nats", s.natsURL(), "http", s.http.Addr(), "services", len(s.specs), "leases", len(s.adm.Leases()))
	return s, nil
}

// readiness is what /readyz checks: the GPU, NATS, the lease store, a
// service to predict for, and (MPS mode) the daemon.
// frontDoor is the embedded listener's front door; nil with a remote
// server or no listener.
func (s *Sidecar) frontDoor() *frontdoor.Door {
	if s.embed == nil {
		return nil
	}
	return s.embed.FrontDoor()
}

func (s *Sidecar) readiness() Checks {
	checks := Checks{
		"gpu": func() error {
			if h := s.gpu.Health(); !h.Healthy {
				return errors.New(h.Reason)
			}
			return nil
		},
		"nats": func() error {
			if st := s.nc.Status(); st != nats.CONNECTED {
				return fmt.Errorf("connection %s", st)
			}
			return nil
		},
		"store": func() error {
			if err := s.checkStore(context.Background()); err != nil {
				return err
			}
			return s.serving.checkWrites(time.Now())
		},
		"admits": func() error { return s.serving.checkAdmits(time.Now()) },
		"fds":    checkFDs,
		"predictor": func() error {
			if len(s.services()) == 0 {
				return errors.New("no inference service configured")
			}
			return nil
		},
	}
	if s.daemon != nil {
		checks["mps"] = func() error {
			if ok, why := (daemonAdapter{s.daemon}).Healthy(); !ok {
				return errors.New(why)
			}
			return nil
		}
	}
	return checks
}

func (s *Sidecar) openGPU(ctx context.Context) error {
	h, err := gpu.Open(ctx, s.cfg.GPU, gpu.Options{Logger: s.log.With("component", "gpu")})
	if err != nil {
		return fmt.Errorf("open gpu: %w", err)
	}
	s.gpu, s.gpuInfo = h, h.Info()
	s.sim.gpu, _ = h.(*gpu.SimDevice)
	s.closers = append(s.closers, func(context.Context) error { return h.Close() })
	return nil
}

func (s *Sidecar) openMPS(ctx context.Context) error {
	c := s.cfg.MPS
	uuid := mps.UUID(s.gpuInfo.UUID)
	if c.Simulated(s.sim.gpu != nil) {
		// The simulated server serves the sidecar's own user.
		sim, err := mps.NewSim(mps.SimConfig{Device: uuid, Defaults: c.Defaults(), UID: ownUID()})
		if err != nil {
			return fmt.Errorf("simulated mps daemon: %w", err)
		}
		s.daemon, s.sim.mps = sim, sim
		s.log.Warn("mps daemon is SIMULATED in process: percentages and clients are the sidecar's own grants", "gpu", s.gpuInfo.Name)
	} else {
		mc := c.Config(uuid)
		mc.Logger, mc.ProcDir = s.log.With("component", "mps"), s.opts.MPSProcDir
		ctl, err := mps.New(mc)
		if err != nil {
			return fmt.Errorf("mps daemon: %w", err)
		}
		s.daemon = ctl
	}
	if err := s.daemon.Ensure(ctx); err != nil {
		// Not fatal: the health loop keeps trying, and admission denies
		// (503) while the daemon is not ready.
		s.log.Error("mps daemon not ready at start", "err", err)
	}
	s.closers = append(s.closers, s.daemon.Close)
	return nil
}

func (s *Sidecar) openModel() error {
	cal, err := predictor.ResolveCalibration(s.cfg.Predictor.Calibration, s.gpuInfo.Name)
	if err != nil {
		return fmt.Errorf("predictor.calibration: %w", err)
	}
	opts := []admission.ModelOption{admission.WithEventBudget(float64(s.cfg.Predictor.MaxEvents))}
	if in := instanceOf(s.gpuInfo); in != nil {
		opts = append(opts, admission.OnInstance(*in))
	} else if s.gpuInfo.MIG != nil {
		s.log.Warn("mig device: the GPU's SM count is unknown, so profiles are taken as measured on the instance", "gpu", s.gpuInfo.Name, "instance_sms", s.gpuInfo.SMs)
	}
	s.model, err = admission.NewModel(cal, s.cfg.Predictor.Requests, s.cfg.Predictor.Seed, s.gpuInfo.SMs, s.cfg.Predictor.Confidence, opts...)
	return err
}

// instanceOf is the MIG instance a device is, for the predictor: its SMs,
// its GPU's, and its share of the GPU's memory bandwidth. nil for a whole
// GPU, or when the GPU's own SM count is unknown (profiles are then taken
// as they are, and gpu.sms gives the instance's count).
func instanceOf(info gpu.Info) *predictor.Instance {
	m := info.MIG
	if m == nil || m.GPUSMs < info.SMs || m.MemorySlices < 1 {
		return nil
	}
	return &predictor.Instance{Name: m.Profile, SMs: info.SMs, GPUSMs: m.GPUSMs, Bandwidth: float64(m.MemorySlices) / gpu.MIGMemorySlices}
}

func (s *Sidecar) openNATS(ctx context.Context) (jetstream.JetStream, error) {
	c := s.cfg.NATS
	var err error
	if c.URL == "" {
		var serverLog *slog.Logger // the embedded server's own log is for debugging only
		if s.log.Enabled(ctx, slog.LevelDebug) {
			serverLog = s.log.With("component", "nats-server")
		}
		listen := c.Listen
		if host, port, _ := net.SplitHostPort(listen); port == "0" {
			listen = net.JoinHostPort(host, "-1") // nats-server's "any free port"; its 0 means 4222
		}
		if s.isLeaf() {
			if err := natsserver.ValidateHubDomain(c.Leaf.HubDomain, s.id); err != nil {
				return nil, fmt.Errorf("nats.leaf.hub_domain: %w", err)
			}
		}
		var launchers []natsserver.Launcher
		if launchers, err = s.launchers(); err != nil {
			return nil, err
		}
		s.setNames(launchers)
		s.embed, err = natsserver.StartEmbedded(natsserver.EmbeddedOptions{Listen: listen, StoreDir: filepath.Join(s.cfg.Sidecar.DataDir, "nats"),
			ServerName: "colocd-" + s.id, Logger: serverLog, Log: s.log.With("component", "nats"), SidecarID: s.id, Launchers: launchers, MaxLauncherConns: c.Launchers.MaxConnections,
			FrontDoor: c.FrontDoor, TLS: c.ServerTLS,
			Leaf: s.leafOptions()})
		if err != nil {
			return nil, fmt.Errorf("embedded nats server: %w", err)
		}
		s.closers = append(s.closers, func(context.Context) error { s.embed.Shutdown(); return nil })
		// Its async errors (a slow consumer) go to the structured log, not
		// to stderr.
		opts := []nats.Option{nats.Name("colocd " + s.id), bus.ErrorLogHandler(s.log.With("component", "nats"))}
		s.nc, err = s.embed.Conn(append(opts, s.opts.NATSOptions...)...)
	} else {
		s.nc, err = bus.Connect(c.URL, bus.ConnectOptions{Credentials: c.Credentials, NKeySeedFile: c.NKey,
			TLS: c.TLS, Name: "colocd " + s.id,
			Logger: s.log.With("component", "nats"),
			// Replies to the sidecar arrive outside the launchers' inbox
			// prefix, where no launcher may subscribe (docs/security.md).
			Options: append([]nats.Option{nats.CustomInboxPrefix(v1.SidecarInboxPrefix(s.id))}, s.opts.NATSOptions...)})
	}
	if err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	s.closers = append(s.closers, func(context.Context) error { drainConn(s.nc, drainBound); return nil })
	js, err := jetstream.New(s.nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}

func (s *Sidecar) openAdmission(ctx context.Context, js jetstream.JetStream) error {
	r, auto := s.cfg.NATS.Replicas, s.cfg.NATS.Replicas == 0
	if auto {
		r = s.autoReplicas()
	}
	kv, err := bus.OpenKV(ctx, js, v1.LeaseBucketName(s.id), r)
	if err != nil && auto && r > 1 {
		s.log.Warn("nats.replicas: the cluster did not take 3 copies of the lease bucket; keeping 1 (set nats.replicas to choose)", "err", err)
		r = 1
		kv, err = bus.OpenKV(ctx, js, v1.LeaseBucketName(s.id), r)
	}
	if err != nil {
		return fmt.Errorf("lease store: %w", err)
	}
	s.replicas = r
	s.log.Info("jetstream: buckets and streams kept on replicas servers", "replicas", r)
	if s.profs, err = bus.OpenProfileStore(ctx, js, s.replicas); err != nil {
		return fmt.Errorf("profile store: %w", err)
	}
	s.js, s.store = js, &kvStore{kv: kv, profs: s.profs, health: &s.serving}
	s.purgeDeleteMarkers(ctx)
	events, err := bus.OpenEvents(ctx, js, s.id, 24*time.Hour, s.replicas)
	if err != nil {
		return fmt.Errorf("event stream: %w", err)
	}
	specs, err := s.cfg.ServiceSpecs()
	if err != nil {
		return err
	}
	s.specs = specs
	if err := s.tel.metrics.observeSLOs(func() []admission.ServiceSpec {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.specs
	}); err != nil {
		return err
	}
	s.watched = newWatchedServices(s.log.With("component", "metrics"), s.cfg.Services)
	s.observations = newObservationLog(s.cfg.Sidecar.DataDir, predictor.Device{Name: s.gpuInfo.Name, SMs: s.gpuInfo.SMs}, s.log.With("component", "observations"))
	deps := admission.Deps{
		Device:    admissionDevice(s.gpu),
		Store:     s.store,
		Events:    &eventSink{events: events, metrics: s.tel.metrics, after: s.afterLeaseChange, log: s.log.With("component", "leases")},
		Predictor: &tracedPredictor{inner: s.model, tracer: s.tel.Tracer, metrics: s.tel.metrics},
		Observer:  s.watched,
		Logger:    s.log.With("component", "admission"),
	}
	// The launchers' processes are the host's own when the GPU or the MPS
	// daemon is real; a fully simulated device knows only made-up PIDs.
	var clock admission.ProcessClock
	if gpu.HostProcesses(s.gpu) || s.daemon != nil && s.sim.mps == nil {
		clock = hostProcesses{}
		deps.Processes = clock
	}
	deps.Faults = s.faults()
	if l, ok := s.gpu.(gpu.Lender); ok && len(s.cfg.GPU.GrantInstances) > 0 {
		deps.Instances = instancesAdapter{l}
	}
	if s.daemon != nil {
		deps.Daemon = daemonAdapter{s.daemon}
		deps.Evictor = &evictor{daemon: s.daemon, clock: clock, log: s.log.With("component", "evict")}
		deps.MPSUser = s.mpsUser()
	}
	if s.adm, err = admission.New(admissionConfig(s.cfg, specs, s.visibleDevice()), deps); err != nil {
		return err
	}
	s.registerIdentities()
	if err := s.adm.Restore(ctx); err != nil {
		return fmt.Errorf("restore leases: %w", err)
	}
	return nil
}

// visibleDevice is the MIG device's UUID when the sidecar guards one: its
// jobs are to see that device alone.
func (s *Sidecar) visibleDevice() string {
	if s.gpuInfo.MIG != nil {
		return s.gpuInfo.UUID
	}
	return ""
}

// maxSearchWorkers bounds the predictions one decision runs at once.
const maxSearchWorkers = 8

// admissionConfig maps the configuration onto the controller's.
func admissionConfig(cfg *configs.Config, specs []admission.ServiceSpec, visible string) admission.Config {
	return admission.Config{Settings: cfg.Admission, Mode: predictor.Mode(cfg.Sharing.Mode), Services: specs,
		PipeDir: cfg.MPS.PipeDir, VisibleDevice: visible,
		// A cold decision is a handful of simulations; on the many-core hosts
		// GPUs sit in, predicting neighbouring percentages at once cuts its
		// latency (the answer is the same: the search equals a linear scan).
		SearchWorkers: min(runtime.GOMAXPROCS(0), maxSearchWorkers)}
}

func (s *Sidecar) services() []admission.ServiceSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.specs
}

// natsURL is where launchers reach NATS: the embedded server's listener
// (or "in-process only"), else the remote server connected to.
func (s *Sidecar) natsURL() string {
	if s.embed != nil {
		if u := s.embed.ClientURL(); u != "" {
			return u + " (embedded)"
		}
		return "in-process only (embedded)"
	}
	return s.nc.ConnectedUrlRedacted()
}

// ID is the sidecar's id on the NATS API.
func (s *Sidecar) ID() string { return s.id }

// HTTPAddr is the bound address of /healthz, /readyz and /metrics.
func (s *Sidecar) HTTPAddr() string { return s.http.Addr() }

// ClientURL is the embedded NATS server's URL ("" with a remote server).
func (s *Sidecar) ClientURL() string {
	if s.embed == nil {
		return ""
	}
	return s.embed.ClientURL()
}

// Conn returns a new connection to the sidecar's NATS, for tests and tools
// in the same process. With the embedded server it connects in process as
// a launcher (the seed in LauncherNKeyFile), with a launcher's permissions;
// with a remote server, opts must carry the identity.
func (s *Sidecar) Conn(opts ...nats.Option) (*nats.Conn, error) {
	if s.embed != nil {
		auth, err := bus.LauncherAuth(s.cfg.LauncherNKeyFile(), "")
		if err != nil {
			return nil, fmt.Errorf("launcher nkey: %w", err)
		}
		return s.embed.ConnAs(append(auth, opts...)...)
	}
	return bus.Connect(s.cfg.NATS.URL, bus.ConnectOptions{Policy: bus.OneShot, Options: opts})
}

// LauncherNKeyFile is the seed file launchers connect to the embedded
// server with ("" with a remote server, whose users are its own).
func (s *Sidecar) LauncherNKeyFile() string {
	if s.embed == nil {
		return ""
	}
	return s.cfg.LauncherNKeyFile()
}

// Ready reports whether every component is ready.
func (s *Sidecar) Ready() error { return s.checks.Ready() }

// Run runs the loops (GPU health, MPS health, lease expiry, the config
// watcher, HTTP) until ctx ends, then shuts down gracefully: the API stops
// taking requests and drains what is in flight; leases stay in the store.
func (s *Sidecar) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.gpu.Run(gctx) })
	if s.daemon != nil {
		g.Go(func() error { return s.daemon.Run(gctx) })
	}
	g.Go(func() error { return s.adm.Run(gctx) })
	g.Go(func() error { return s.watchStore(gctx) })
	g.Go(func() error { return s.watched.Run(gctx) })
	g.Go(func() error { return s.guardLoop(gctx) })
	g.Go(func() error { return s.fleet.run(gctx) })
	g.Go(func() error { return s.http.serve(gctx) })
	g.Go(func() error { return s.notifyManager(gctx) })
	g.Go(func() error { return s.watchDrain(gctx) })
	if s.embed != nil {
		g.Go(func() error { return s.watchLaunchers(gctx) })
	}
	if s.watcher != nil {
		updates, cancel := s.watcher.Subscribe()
		g.Go(func() error { defer cancel(); return s.watcher.Run(gctx) })
		g.Go(func() error { return s.applyReloads(gctx, updates) })
	}
	<-gctx.Done()
	// Stop taking requests first, let those in flight finish, then stop
	// the loops; the leases are in the KV store and nothing is released.
	if err := s.service.Stop(); err != nil {
		s.log.Warn("stop nats service", "err", err)
	}
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("a component stopped", "err", err)
		s.Close(context.Background())
		return err
	}
	return s.Close(context.Background())
}

// applyReloads hands new SLOs and admission values to the controller.
func (s *Sidecar) applyReloads(ctx context.Context, updates <-chan *configs.Config) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case cfg, ok := <-updates:
			if !ok {
				return nil
			}
			specs, err := cfg.ServiceSpecs()
			if err != nil {
				s.log.Error("config reload: keeping the old services", "err", err)
				s.applyRejected.Store(&configs.Rejection{At: time.Now(), Err: err})
				continue
			}
			r, err := s.adm.Reconfigure(ctx, admissionConfig(cfg, specs, s.visibleDevice()))
			if errors.Is(err, admission.ErrInvalid) {
				s.log.Error("config reload: keeping the old services and admission settings", "err", err)
				s.applyRejected.Store(&configs.Rejection{At: time.Now(), Err: err})
				continue
			}
			s.applyRejected.Store(nil)
			s.mu.Lock()
			s.specs = specs
			s.mu.Unlock()
			s.watched.set(cfg.Services)
			s.fleet.changed()
			if err != nil { // applied, but the leases were not all re-planned
				s.log.Error("config reload: applied; re-checking the leases failed", "err", err)
			}
			s.log.Info("config reloaded: services and admission settings applied", "services", len(specs),
				"changed", strings.Join(r.Changed, ", "), "lease_events", len(r.Events))
			if len(r.NeedRestart) > 0 {
				s.log.Warn("config reload: these admission settings take effect after a restart", "fields", strings.Join(r.NeedRestart, ", "))
			}
		}
	}
}

// afterLeaseChange records the number of live leases and shows them on a
// simulated GPU and MPS daemon (simdevice.go).
func (s *Sidecar) afterLeaseChange() {
	if s.adm == nil {
		return
	}
	s.fleet.changed()
	// Read and shown under one lock: two changes at once (requests run in
	// parallel) must not show the older read last, or the simulated
	// device would keep a released lease's processes until the next change.
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	leases := s.adm.Leases()
	if s.tel != nil {
		byState := map[string]int64{admission.StateActive: 0, admission.StateThrottling: 0, admission.StateRevoked: 0, admission.StateReleased: 0}
		for _, l := range leases {
			st, _ := l.State()
			byState[st]++
		}
		for st, n := range byState {
			s.tel.metrics.leases.Record(context.Background(), n, metricAttrs("state", st))
		}
		pct := 0
		for _, l := range leases {
			pct += l.Pct
		}
		s.tel.metrics.leasePct.Record(context.Background(), int64(pct))
	}
	if s.sim.simulated() {
		s.sim.show(leases, s.adm.Config().VisibilityWindow)
	}
}

// drainBound bounds how long a stop waits for the NATS connection to
// drain: the requests its subscriptions hold answered, its replies sent.
const drainBound = 10 * time.Second

// drainConn closes nc once every message its subscriptions hold has been
// handled and what they published is flushed, or after bound. Closing at
// once would drop the requests that had reached the connection but not
// yet the API's handler: their launchers would wait for their timeout. A
// stopping API answers them 503 "stopping", nothing done (bus.Service.Stop).
func drainConn(nc *nats.Conn, bound time.Duration) {
	if err := nc.Drain(); err != nil {
		nc.Close()
		return
	}
	deadline := time.Now().Add(bound)
	for !nc.IsClosed() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	nc.Close()
}

// Close stops every component New started, in reverse order. It never quits
// an MPS daemon it did not start (nor, by default, one it did).
func (s *Sidecar) Close(ctx context.Context) error {
	s.mu.Lock()
	closers := s.closers
	s.closers = nil
	s.mu.Unlock()
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i](ctx))
	}
	return errors.Join(errs...)
}

// configRejected is the latest edit of the config file that was not
// applied, by the watcher (it does not load or validate) or by the
// controller; nil when the last edit was applied.
func (s *Sidecar) configRejected() *v1.ConfigRejection {
	var last *configs.Rejection
	if s.watcher != nil {
		last = s.watcher.Rejected()
	}
	if r := s.applyRejected.Load(); r != nil && (last == nil || r.At.After(last.At)) {
		last = r
	}
	if last == nil {
		return nil
	}
	return &v1.ConfigRejection{At: last.At.UTC(), Error: last.Err.Error()}
}

// autoReplicas is nats.replicas 0's choice: one copy on the embedded
// server; on a remote server, 3 when it is part of a cluster of three or
// more (its INFO names at least two peers), so that a fleet that forgets
// the key does not lose its leases with one node; else 1.
func (s *Sidecar) autoReplicas() int {
	if s.embed != nil || s.cfg.NATS.URL == "" {
		return 1
	}
	if len(s.nc.Servers()) >= 3 {
		return 3
	}
	return 1
}
