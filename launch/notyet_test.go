package launch

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/proc"
)

// gpuRegistrar refuses, as a sidecar on a real GPU does, a process that
// holds no NVIDIA device open (it has no CUDA context yet).
type gpuRegistrar struct {
	Client
	procs proc.Table
	got   [][]int
}

func (g *gpuRegistrar) Register(_ context.Context, _ string, req *v1.RegisterRequest) error {
	for i, p := range req.PIDs {
		if !g.procs.HasOpen(p, gpuDevices) {
			return &v1.Error{Code: v1.CodeBadRequest, Description: fmt.Sprintf("invalid register: pids[%d]: want a process with a CUDA context on this GPU, got %d", i, p)}
		}
	}
	g.got = append(g.got, slices.Clone(req.PIDs))
	return nil
}

// The command, named while it has not opened the GPU yet and refused for
// it, is registered once it opens the device: it is not left out for the
// rest of its life.
func TestCommandRegisteredOnceItOpensTheGPU(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	const pid = 4242
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	stat := strconv.Itoa(pid) + " (train) S 1 " + strconv.Itoa(pid) + " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 500 0\n"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, "self"), 0o755)
	procs := proc.Table{Root: root}
	reg := &gpuRegistrar{procs: procs}
	var recs []Record
	s := &supervisor{cfg: Config{Processes: 1}, c: reg, procs: procs, rep: &reporter{w: io.Discard, hook: func(r Record) { recs = append(recs, r) }},
		child: &child{pid: pid, done: make(chan struct{})}, notGPU: map[procKey]bool{}, notYet: map[procKey]bool{}}

	s.register(true)
	if len(reg.got) != 0 || len(recs) != 1 || recs[0].Event != "register_failed" {
		t.Fatalf("before the GPU: registered %v, records %+v; want one refusal said", reg.got, recs)
	}
	s.register(false)
	s.register(false)
	if len(recs) != 1 {
		t.Errorf("the refused command was named again before it opened the GPU: %+v", recs)
	}
	if err := os.Symlink("/dev/nvidia0", filepath.Join(dir, "fd", "7")); err != nil {
		t.Fatal(err)
	}
	s.register(false)
	if len(reg.got) != 1 || !slices.Equal(reg.got[0], []int{pid}) {
		t.Errorf("after it opened the GPU: registered %v, want [[%d]]", reg.got, pid)
	}
}
