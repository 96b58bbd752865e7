package layers

import (
	"go/build"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/testfiles"
)

const module = "github.com/colocd/colocd"

// floors: every package of the module, by its path below the module, on
// its floor (docs/architecture.md#floors). A package may import packages
// on its own floor and below. A path ending in "/" covers every package
// below it.
var floors = map[string]int{
	// 0: helpers that know nothing of GPUs or NATS.
	"internal/": 0, "field": 0, "api/v1": 0,
	// 1: the model of the GPU and its workloads.
	"predictor": 1, "predictor/kineto": 1, "predictor/ncu": 1, "predictor/calibrate": 1, "predictor/sweep": 1,
	// 2: the decision, and one adapter per outside thing (NATS, NVML, the
	// MPS daemon, the inference server's metrics), and the configuration
	// that composes their sections; the fleet's capacity summaries and
	// placement; the launcher's side; the simulated inference server; the
	// MIG layout planner.
	"admission": 2, "bus": 2, "fleet": 2, "natsserver": 2, "gpu": 2, "mps": 2, "mps/internal/fakemps": 2, "observe": 2, "configs": 2, "launch": 2,
	"simserver": 2, "simserver/llm": 2, "migplan": 2,
	// 3: what wires them into a running sidecar, and the programs that
	// drive one.
	"sidecar": 3, "demo": 3, "loadtest": 3, "replay": 3,
	// 4: the command: flags and wiring.
	"cmd/colocd": 4,
	// Not part of the product: the deployment files' checks.
	"deploy": 4,
}

// floorOf returns rel's floor and whether the table names it.
func floorOf(rel string) (int, bool) {
	if f, ok := floors[rel]; ok {
		return f, true
	}
	for prefix, f := range floors {
		if strings.HasSuffix(prefix, "/") && strings.HasPrefix(rel, prefix) {
			return f, true
		}
	}
	return 0, false
}

func TestNoPackageImportsAFloorAbove(t *testing.T) {
	t.Parallel()
	root := testfiles.Root(t)
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "tools" || name == "bin" || name == "node_modules") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no Go files here
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		own, ok := floorOf(rel)
		if !ok {
			t.Errorf("package %s is on no floor: add it to floors here and in docs/architecture.md", rel)
			return nil
		}
		seen++
		for _, imp := range pkg.Imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if f, known := floorOf(dep); known && f > own {
				t.Errorf("%s (floor %d) imports %s (floor %d): a package imports only its own floor and below", rel, own, dep, f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 10 {
		t.Fatalf("found %d packages under %s: the walk missed the module", seen, root)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the module's root: %v", root, err)
	}
}

// The servers: the embedded nats-server and colocd's packages that run one
// or decide.
var servers = []string{"github.com/nats-io/nats-server/", module + "/natsserver", module + "/admission", module + "/sidecar"}

// The launcher's side (colocd run, and every program that only asks a
// sidecar) links no server: neither the embedded nats-server nor the
// decision. A launcher that links them grows by a server it never runs, and
// its build breaks with the server's.
func TestTheLauncherLinksNoServer(t *testing.T) {
	t.Parallel()
	linksNone(t, "./launch", servers...)
}

// The fleet's record and placement link no server either, nor the client
// they are carried by: Place asks through fleet.Quoter, which bus.Client
// is, so that bus may carry the summaries without a cycle.
func TestTheFleetLinksNoServerNorClient(t *testing.T) {
	t.Parallel()
	linksNone(t, "./fleet", append(servers, module+"/bus")...)
}

// linksNone fails t when pkg depends on a package whose path starts with
// one of banned (a path, or a path and "/").
func linksNone(t *testing.T, pkg string, banned ...string) {
	t.Helper()
	root := testfiles.Root(t)
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps %s listed %d packages: %q", pkg, len(deps), out)
	}
	for _, d := range deps {
		for _, b := range banned {
			if strings.HasPrefix(d+"/", strings.TrimSuffix(b, "/")+"/") {
				t.Errorf("%s depends on %s, which it may not link", pkg, d)
			}
		}
	}
}
