package gpu

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/fieldtest"
)

// TestSMCount checks the table through resolveSMs, which passes on
// SMCount's answer ("table") unless the configuration overrides it
// ("config").
func TestSMCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		device   string // as NVML reports it
		override int    // gpu.sms; 0: none
		want     int    // 0: unknown
	}{
		{name: "V100 SXM2", device: "Tesla V100-SXM2-16GB", want: 80},
		{name: "V100 PCIe", device: "Tesla V100-PCIE-32GB", want: 80},
		{name: "A100 SXM4 40GB", device: "NVIDIA A100-SXM4-40GB", want: 108},
		{name: "A100 PCIe 80GB", device: "NVIDIA A100 80GB PCIe", want: 108},
		{name: "A100 without vendor", device: "A100-SXM4-80GB", want: 108},
		{name: "A30", device: "NVIDIA A30", want: 56},
		{name: "A10", device: "NVIDIA A10", want: 72},
		{name: "A40", device: "NVIDIA A40", want: 84},
		{name: "L4", device: "NVIDIA L4", want: 58},
		{name: "L40", device: "NVIDIA L40", want: 142},
		{name: "L40S", device: "NVIDIA L40S", want: 142},
		{name: "H100 SXM5", device: "NVIDIA H100 80GB HBM3", want: 132},
		{name: "H100 SXM spelled out", device: "NVIDIA H100 SXM5 80GB", want: 132},
		{name: "H100 PCIe", device: "NVIDIA H100 PCIe", want: 114},
		{name: "H200", device: "NVIDIA H200", want: 132},
		{name: "H200 as go-nvml's mock names it", device: "NVIDIA H200 141GB HBM3e", want: 132},
		{name: "B200", device: "NVIDIA B200", want: 148},
		{name: "case and spacing", device: "  nvidia   h100_pcie ", want: 114},
		{name: "A10G is not an A10", device: "NVIDIA A10G", want: 0},
		{name: "H100 NVL is not in the table", device: "NVIDIA H100 NVL", want: 0},
		{name: "H200 NVL is not in the table", device: "NVIDIA H200 NVL", want: 0},
		{name: "unknown board word", device: "Tesla V100-FHHL-16GB", want: 0},
		{name: "two form factors", device: "NVIDIA H100 PCIe SXM5", want: 0},
		{name: "unknown model", device: "NVIDIA GeForce RTX 4090", want: 0},
		{name: "vendor only", device: "NVIDIA", want: 0},
		{name: "empty", device: "", want: 0},
		{name: "override wins over the table", device: "NVIDIA H200", override: 66, want: 66},
		{name: "override for an unknown device", device: "NVIDIA A10G", override: 80, want: 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, source, err := resolveSMs(tt.device, tt.override)
			if tt.want == 0 {
				if !errors.Is(err, ErrUnknownSMs) || got != 0 || source != "" {
					t.Fatalf("resolveSMs(%q, %d) = %d, %q, %v; want ErrUnknownSMs", tt.device, tt.override, got, source, err)
				}
				fieldtest.WantText(t, err, `"`+tt.device+`"`, "gpu.sms", "COLOCD_GPU_SMS")
				return
			}
			wantSource := "table"
			if tt.override > 0 {
				wantSource = "config"
			}
			if err != nil || got != tt.want || source != wantSource {
				t.Fatalf("resolveSMs(%q, %d) = %d, %q, %v; want %d, %q", tt.device, tt.override, got, source, err, tt.want, wantSource)
			}
		})
	}
}

// FuzzSMCount checks the device-name parser: it never panics, a known name
// has a positive count whatever its case, and an unknown one fails with
// ErrUnknownSMs.
func FuzzSMCount(f *testing.F) {
	for _, s := range []string{"NVIDIA H100 PCIe", "Tesla V100-SXM2-16GB", "NVIDIA A100 80GB PCIe", "NVIDIA H200 141GB HBM3e",
		"NVIDIA A10G", "", "nvidia", "sxm-sxm", "H100 SXM5 PCIe", "-_-", "NVIDIA L40S 48gb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n, err := SMCount(name)
		if err != nil {
			if !errors.Is(err, ErrUnknownSMs) || n != 0 {
				t.Fatalf("SMCount(%q) = %d, %v", name, n, err)
			}
			return
		}
		if n <= 0 || n > MaxSMs {
			t.Fatalf("SMCount(%q) = %d", name, n)
		}
		upper := strings.ToUpper(name)
		if !slices.Equal(splitName(upper), splitName(name)) {
			return // Unicode case mapping changed the words themselves
		}
		if up, err := SMCount(upper); err != nil || up != n {
			t.Fatalf("SMCount(%q) = %d but SMCount(%q) = %d, %v", name, n, upper, up, err)
		}
	})
}
