package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// fakeOwners is a fakeClock whose processes also have a user.
type fakeOwners struct {
	fakeClock
	uid map[int]int
}

func (f fakeOwners) UserOf(pid int) (int, error) {
	uid, ok := f.uid[pid]
	if !ok {
		return 0, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	return uid, nil
}

// fakeMPSUser is the MPS server's user: ok false when no server runs.
type fakeMPSUser struct {
	uid, server int
	ok          bool
}

func (f *fakeMPSUser) ServerUser(context.Context) (int, int, bool) { return f.uid, f.server, f.ok }

var _ ProcessOwner = fakeOwners{}

// TestRegisterRefusesAnotherUserThanTheMPSServers: MPS serves one user at
// a time, so a job's process of another user than the running server's
// would wait at CUDA init for as long as the inference server runs; its
// register is refused with a reason that says so.
func TestRegisterRefusesAnotherUserThanTheMPSServers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, predictor.ModeMPS, 100, nil)
		d := mustDecide(t, h, request("train"), Grant)
		time.Sleep(time.Second)
		now := time.Now()
		host := fakeOwners{fakeClock: fakeClock{60: now, 61: now, 62: now}, uid: map[int]int{60: 1000, 61: 0, 62: 1000}}
		user := &fakeMPSUser{uid: 1000, server: 5012, ok: true}
		h.c.deps.Processes, h.c.deps.MPSUser = host, user
		tests := []struct {
			name   string
			server fakeMPSUser
			pids   []int
			want   string // "" accepted
		}{
			{name: "root beside a server of uid 1000", server: *user, pids: []int{60, 61},
				want: "pids[1]: want a process of uid 1000, the user MPS server 5012 serves (a client of another user waits at CUDA init until every client of that server has exited: run the job as uid 1000), got process 61 of uid 0"},
			{name: "uid 1000 beside a root server", server: fakeMPSUser{uid: 0, server: 77, ok: true}, pids: []int{60},
				want: "pids[0]: want a process of uid 0, the user MPS server 77 serves"},
			{name: "the server's user", server: *user, pids: []int{60, 62}},
			{name: "no server known: not checked", server: fakeMPSUser{}, pids: []int{61}},
		}
		for _, tt := range tests { // no t.Run in a bubble
			*user = tt.server
			err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), tt.pids)
			if tt.want == "" {
				if err != nil {
					t.Errorf("%s: %v", tt.name, err)
				}
				continue
			}
			if wantInvalid(t, tt.name, err, tt.want) && strings.Contains(err.Error(), "COLOCD_LEASE_ID") {
				t.Errorf("%s: %v names more than the user", tt.name, err)
			}
		}
	})
}
