package v1

import (
	"strings"
	"testing"
)

func TestValidateSidecarID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"GPU-5f2d8c4e-1a2b-3c4d-5e6f-7a8b9c0d1e2f", "MIG-GPU-5f2d/1/0", "node7_gpu3"} {
		if err := ValidateSidecarID(id); err != nil {
			t.Errorf("ValidateSidecarID(%q) = %v, want it accepted", id, err)
		}
	}
	for _, id := range []string{"", "gpu.0", "gpu*", "gpu>", "gpu 0", "gpu\t0", "gpu\x00", "\xff", strings.Repeat("a", 129)} {
		if ValidateSidecarID(id) == nil {
			t.Errorf("ValidateSidecarID(%q) accepted it", id)
		}
	}
}

func TestJobToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		job, want string
	}{
		{"resnet50-ft_42", "resnet50-ft_42"},
		{"team.a/job 7", "=dGVhbS5hL2pvYiA3"},
		{"=x", "=PXg"},
		{"*", "=Kg"},
	}
	for _, tt := range tests {
		got, err := JobToken(tt.job)
		if err != nil || got != tt.want {
			t.Errorf("JobToken(%q) = %q, %v; want %q", tt.job, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", strings.Repeat("j", 257)} {
		if _, err := JobToken(bad); err == nil {
			t.Errorf("JobToken(%d bytes) succeeded", len(bad))
		}
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	tests := []struct{ got, want string }{
		{EndpointSubject("gpu-a", EndpointAdmit), "colocd.v1.gpu-a.admit"},
		{EventStreamName("GPU-5f2d/1:0"), "COLOCD_EVENTS_GPU-5f2d_1_0"},
		{LeaseBucketName("GPU-5f2d"), "colocd_leases_GPU-5f2d"},
		{QuoteSubject, "colocd.v1.quote"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	if s, err := EventSubject("gpu-a", "j.1"); err != nil || s != "colocd.v1.gpu-a.events.=ai4x" {
		t.Errorf("EventSubject = %q, %v", s, err)
	}
}

// JobToken must give a valid subject token, different for different ids.
func FuzzJobToken(f *testing.F) {
	for _, s := range []string{"job-1", "a.b", "*", ">", "a b", "=x", "ü", "team/job:7"} {
		f.Add(s, "job-1")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ta, errA := JobToken(a)
		tb, errB := JobToken(b)
		if errA == nil {
			if err := ValidateSidecarID(ta); err != nil && len(ta) <= maxSidecarIDLen {
				t.Fatalf("token %q of %q is not a subject token: %v", ta, a, err)
			}
			for _, c := range []byte(ta) {
				if !isPlainByte(c) && c != '=' {
					t.Fatalf("token %q of %q has byte %q", ta, a, c)
				}
			}
		}
		if errA == nil && errB == nil && a != b && ta == tb {
			t.Fatalf("ids %q and %q share token %q", a, b, ta)
		}
	})
}
