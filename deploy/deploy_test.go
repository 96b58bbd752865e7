// Package deploy holds what a deployment needs (Kubernetes manifests, a
// systemd unit, the NATS accounts, a Grafana dashboard, Prometheus alerting
// rules); its tests check that they hold together with the code, and with
// the tools that read them where those are installed (make deploy-check).
package deploy

import (
	"bytes"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/colocd/colocd/configs"
)

// manifest is one file's objects, decoded strictly into the API's types: a
// misspelt or misplaced field fails here, not at kubectl apply.
type manifest struct {
	configMaps map[string]*corev1.ConfigMap
	pods       map[string]*corev1.PodSpec // by the owning object's kind/name
}

func readManifest(t *testing.T, file string) manifest {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := manifest{configMaps: map[string]*corev1.ConfigMap{}, pods: map[string]*corev1.PodSpec{}}
	for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s, document %d: %v", file, i, err)
		}
		strict := func(v any) {
			if err := yaml.UnmarshalStrict(doc, v); err != nil {
				t.Fatalf("%s, document %d (%s): %v", file, i, meta.Kind, err)
			}
		}
		switch meta.Kind {
		case "ConfigMap":
			var o corev1.ConfigMap
			strict(&o)
			m.configMaps[o.Name] = &o
		case "Pod":
			var o corev1.Pod
			strict(&o)
			m.pods["Pod/"+o.Name] = &o.Spec
		case "Deployment":
			var o appsv1.Deployment
			strict(&o)
			m.pods["Deployment/"+o.Name] = &o.Spec.Template.Spec
		case "Job":
			var o batchv1.Job
			strict(&o)
			m.pods["Job/"+o.Name] = &o.Spec.Template.Spec
		default:
			t.Errorf("%s, document %d: kind %q is not checked here", file, i, meta.Kind)
		}
	}
	return m
}

// Each manifest's colocd container serves the config its ConfigMap holds,
// with its probes on the telemetry port, and shares the MPS pipe directory
// with every GPU container of its pod; a vLLM server gets a /dev/shm in
// memory, and colocd watches its metrics with the vLLM preset.
func TestKubernetesManifests(t *testing.T) {
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			m := readManifest(t, file)
			sidecars := 0
			users := map[string]int64{} // the MPS user of each sidecar pod's pipe directory
			for owner, spec := range m.pods {
				colocd := container(spec, "colocd")
				if colocd == nil {
					continue // a launcher
				}
				sidecars++
				if pipe, uid := checkSidecarPod(t, owner, spec, colocd, m); uid >= 0 {
					users[pipe] = uid
				}
			}
			if sidecars == 0 {
				t.Error("no pod with a colocd container")
			}
			// A launcher's containers that reach a sidecar's MPS daemon run
			// as its one user: another would wait at CUDA init.
			for owner, spec := range m.pods {
				if container(spec, "colocd") != nil {
					continue
				}
				for _, c := range spec.Containers {
					for pipe, uid := range users {
						if mountedAt(spec, &c, pipe) == nil {
							continue
						}
						if got := runAsUser(spec, &c); got == nil || *got != uid {
							t.Errorf("%s: container %s reaches the MPS daemon at %s as uid %v, want the MPS user %d (docs/mps.md#one-user)", owner, c.Name, pipe, deref(got), uid)
						}
					}
				}
			}
		})
	}
}

// checkSidecarPod checks a pod with a colocd container and returns its
// MPS pipe directory and the one user that reaches it (-1: none set).
func checkSidecarPod(t *testing.T, owner string, spec *corev1.PodSpec, colocd *corev1.Container, m manifest) (string, int64) {
	i := slices.Index(colocd.Args, "--config")
	if len(colocd.Args) == 0 || colocd.Args[0] != "serve" || i < 0 || i+1 >= len(colocd.Args) {
		t.Fatalf("%s: colocd args %v, want serve --config FILE", owner, colocd.Args)
	}
	cfgPath := colocd.Args[i+1]
	vol := mountedAt(spec, colocd, path.Dir(cfgPath))
	if vol == nil || vol.ConfigMap == nil || m.configMaps[vol.ConfigMap.Name] == nil {
		t.Fatalf("%s: %s is not in a ConfigMap of the manifest", owner, cfgPath)
	}
	text, ok := m.configMaps[vol.ConfigMap.Name].Data[path.Base(cfgPath)]
	if !ok {
		t.Fatalf("%s: ConfigMap %s has no %s", owner, vol.ConfigMap.Name, path.Base(cfgPath))
	}
	f := filepath.Join(t.TempDir(), "colocd.yaml")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.LoadWith(f, nil)
	if err != nil {
		t.Fatalf("%s: the ConfigMap's config does not load: %v", owner, err)
	}
	// The probes reach the telemetry listener.
	_, port, err := net.SplitHostPort(cfg.Telemetry.HTTP)
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(cfg.Telemetry.HTTP); host == "127.0.0.1" || host == "localhost" {
		t.Errorf("%s: telemetry.http %s: the kubelet's probes cannot reach loopback", owner, cfg.Telemetry.HTTP)
	}
	probes := []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"startupProbe", colocd.StartupProbe, "/readyz"}, {"readinessProbe", colocd.ReadinessProbe, "/readyz"}, {"livenessProbe", colocd.LivenessProbe, "/healthz"},
	}
	for _, p := range probes {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || portOf(colocd, p.probe.HTTPGet.Port.String()) != port {
			t.Errorf("%s: want a %s on %s at port %s, got %+v", owner, p.name, p.path, port, p.probe)
		}
	}
	checkNativeSidecar(t, owner, spec, colocd)
	checkSeesGPU(t, owner, colocd)
	// Every GPU container shares the MPS pipe directory at the same path.
	pipe := mountedAt(spec, colocd, cfg.MPS.PipeDir)
	if pipe == nil {
		t.Fatalf("%s: colocd does not mount mps.pipe_dir %s", owner, cfg.MPS.PipeDir)
	}
	for _, c := range spec.Containers {
		if _, gpu := c.Resources.Limits["nvidia.com/gpu"]; !gpu {
			continue
		}
		if v := mountedAt(spec, &c, cfg.MPS.PipeDir); v == nil || v.Name != pipe.Name || env(&c, "CUDA_MPS_PIPE_DIRECTORY") != cfg.MPS.PipeDir {
			t.Errorf("%s: GPU container %s does not share %s with colocd (CUDA_MPS_PIPE_DIRECTORY %q)", owner, c.Name, cfg.MPS.PipeDir, env(&c, "CUDA_MPS_PIPE_DIRECTORY"))
		}
		if !strings.Contains(c.Image, "vllm") {
			continue
		}
		if v := mountedAt(spec, &c, "/dev/shm"); v == nil || v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
			t.Errorf("%s: vLLM container %s has no /dev/shm in memory", owner, c.Name)
		}
		watched := false
		for _, svc := range cfg.Services {
			u, err := url.Parse(svc.Metrics.URL)
			if err == nil && svc.Metrics.Preset == "vllm" && portOf(&c, u.Port()) == u.Port() && u.Port() != "" {
				watched = true
			}
		}
		if !watched {
			t.Errorf("%s: no service watches vLLM container %s's metrics with the vllm preset", owner, c.Name)
		}
	}
	return cfg.MPS.PipeDir, checkOneUser(t, owner, spec, colocd)
}

// checkNativeSidecar: colocd starts before the inference server, as an
// init container that keeps running (restartPolicy Always, Kubernetes
// 1.29+), so that the server starts once colocd's startup probe passes and
// its CUDA context is an MPS client from the first.
func checkNativeSidecar(t *testing.T, owner string, spec *corev1.PodSpec, colocd *corev1.Container) {
	t.Helper()
	i := slices.IndexFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == colocd.Name })
	if i < 0 {
		t.Errorf("%s: colocd is not an init container: the inference server may create its CUDA context before the MPS daemon exists", owner)
		return
	}
	if p := colocd.RestartPolicy; p == nil || *p != corev1.ContainerRestartPolicyAlways {
		t.Errorf("%s: colocd's restartPolicy %v, want Always (a native sidecar, not an init step)", owner, deref(p))
	}
	for _, c := range spec.InitContainers[i+1:] {
		if c.RestartPolicy == nil {
			t.Errorf("%s: init container %s runs after colocd and holds the inference server back behind it", owner, c.Name)
		}
	}
}

// checkSeesGPU: colocd needs NVML and the MPS binaries but must not take a
// device from the device plugin; the NVIDIA container toolkit gives them
// to a container with NVIDIA_VISIBLE_DEVICES set and the utility (NVML,
// nvidia-smi) and compute (CUDA, the MPS binaries) capabilities.
func checkSeesGPU(t *testing.T, owner string, colocd *corev1.Container) {
	t.Helper()
	for _, rl := range []corev1.ResourceList{colocd.Resources.Limits, colocd.Resources.Requests} {
		if _, ok := rl["nvidia.com/gpu"]; ok {
			t.Errorf("%s: colocd asks for nvidia.com/gpu: it would take a device from the device plugin", owner)
		}
	}
	switch v := env(colocd, "NVIDIA_VISIBLE_DEVICES"); v {
	case "", "void", "none":
		t.Errorf("%s: colocd's NVIDIA_VISIBLE_DEVICES %q, want the GPU (an index or UUID) or all", owner, v)
	}
	caps := strings.Split(env(colocd, "NVIDIA_DRIVER_CAPABILITIES"), ",")
	for _, want := range []string{"compute", "utility"} {
		if !slices.Contains(caps, want) && !slices.Contains(caps, "all") {
			t.Errorf("%s: colocd's NVIDIA_DRIVER_CAPABILITIES %q, want compute and utility", owner, env(colocd, "NVIDIA_DRIVER_CAPABILITIES"))
			break
		}
	}
}

// checkOneUser: colocd (whose MPS daemon serves its user) and every GPU
// container of the pod run as one set, non-root UID, and returns it (-1
// when colocd's is not set).
func checkOneUser(t *testing.T, owner string, spec *corev1.PodSpec, colocd *corev1.Container) int64 {
	t.Helper()
	uid := runAsUser(spec, colocd)
	if uid == nil || *uid == 0 {
		t.Errorf("%s: colocd's runAsUser %v, want one non-root MPS user set in the manifest", owner, deref(uid))
		return -1
	}
	for _, c := range spec.Containers {
		if _, gpu := c.Resources.Limits["nvidia.com/gpu"]; !gpu {
			continue
		}
		if got := runAsUser(spec, &c); got == nil || *got != *uid {
			t.Errorf("%s: GPU container %s runs as uid %v, colocd as %d: an MPS server serves one user (docs/mps.md#one-user)", owner, c.Name, deref(got), *uid)
		}
	}
	return *uid
}

// runAsUser is c's effective runAsUser: its own, else the pod's; nil when
// neither sets one (the image's user).
func runAsUser(spec *corev1.PodSpec, c *corev1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if spec.SecurityContext != nil {
		return spec.SecurityContext.RunAsUser
	}
	return nil
}

// deref is *p, or nil, for a message.
func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// container is the container (or init container) named name.
func container(spec *corev1.PodSpec, name string) *corev1.Container {
	for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}

// mountedAt is the volume c mounts at dir.
func mountedAt(spec *corev1.PodSpec, c *corev1.Container, dir string) *corev1.Volume {
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) != path.Clean(dir) {
			continue
		}
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == m.Name {
				return &spec.Volumes[i]
			}
		}
	}
	return nil
}

// portOf resolves a port name of c to its number ("" when c has none).
func portOf(c *corev1.Container, p string) string {
	for _, cp := range c.Ports {
		if cp.Name == p || strings.EqualFold(p, itoa(cp.ContainerPort)) {
			return itoa(cp.ContainerPort)
		}
	}
	return ""
}

func env(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// The image is built from pinned parts: every base image by tag and
// digest, the build stage on a release of go.mod's Go, the sidecar as a non-root user, with a
// HEALTHCHECK that the image can run (colocd probe: it has no curl).
func TestDockerfilePinned(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`^FROM [a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}( AS [a-z]+)?$`)
	var froms []string
	user, health := "", ""
	for line := range strings.SplitSeq(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "FROM "):
			froms = append(froms, line)
			if !pinned.MatchString(line) {
				t.Errorf("%q: want FROM image:tag@sha256:<digest>", line)
			}
		case strings.HasPrefix(line, "USER "):
			user = strings.TrimSpace(strings.TrimPrefix(line, "USER "))
		case strings.HasPrefix(line, "HEALTHCHECK "):
			health = line
		}
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	release := regexp.MustCompile(`^FROM golang:` + regexp.QuoteMeta(string(goLine[1])) + `\.\d+-`)
	if len(froms) != 2 || !release.MatchString(froms[0]) {
		t.Errorf("FROM lines %q, want a build stage on a golang:%s.x release (go.mod's) and a runtime stage", froms, goLine[1])
	}
	if user == "" || user == "root" || user == "0" {
		t.Errorf("USER %q, want the sidecar to run as a non-root user", user)
	}
	if !strings.Contains(health, "HEALTHCHECK") || !strings.Contains(string(raw), `CMD ["colocd", "probe"`) {
		t.Errorf("want a HEALTHCHECK that runs colocd probe, got %q", health)
	}
}
