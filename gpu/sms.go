package gpu

import (
	"fmt"
	"strings"
)

// MaxSMs bounds the SM count accepted from configuration (gpu.sms).
const MaxSMs = 1024

// smModel is one row of the SM table: a GPU model (the first word of its NVML
// name after "NVIDIA"/"Tesla", lower-cased) in one form factor.
type smModel struct {
	model string
	// form is "pcie", "sxm" or "nvl" when the name says so, "" when it
	// names no form factor, and "*" for a model whose every form has the
	// same SM count.
	form string
	sms  int
}

// smTable holds the SM counts colocd knows; NVML has no call for a full
// GPU's SM count. docs/gpu.md lists the source of each number. A name that
// matches no row needs the gpu.sms override.
var smTable = []smModel{
	{model: "v100", form: "*", sms: 80},  // Tesla V100-SXM2-16GB, V100-PCIE-32GB, …
	{model: "a100", form: "*", sms: 108}, // NVIDIA A100-SXM4-40GB, A100 80GB PCIe, …
	{model: "a30", form: "*", sms: 56},
	{model: "a10", form: "*", sms: 72}, // not the A10G (a different board)
	{model: "a40", form: "*", sms: 84},
	{model: "l4", form: "*", sms: 58},
	{model: "l40", form: "*", sms: 142},
	{model: "l40s", form: "*", sms: 142},
	{model: "h100", form: "", sms: 132}, // the SXM5 board: "NVIDIA H100 80GB HBM3"
	{model: "h100", form: "sxm", sms: 132},
	{model: "h100", form: "pcie", sms: 114},
	{model: "h200", form: "", sms: 132}, // "NVIDIA H200" (SXM)
	{model: "h200", form: "sxm", sms: 132},
	{model: "b200", form: "", sms: 148},
}

// SMCount returns the number of streaming multiprocessors of the GPU whose
// NVML name is name (e.g. "NVIDIA H100 PCIe"), from colocd's table. Case,
// hyphens, the vendor prefix, memory sizes ("80GB") and memory types
// ("HBM3e") do not matter; any other word the table does not know makes the
// name unknown, so that a different board is never given a wrong count. An
// unknown name returns an error wrapping ErrUnknownSMs that names the device
// and the gpu.sms override key.
func SMCount(name string) (int, error) {
	model, form, ok := parseDeviceName(name)
	if ok {
		for _, m := range smTable {
			if m.model == model && (m.form == "*" || m.form == form) {
				return m.sms, nil
			}
		}
	}
	return 0, fmt.Errorf("%w for device %q: set gpu.sms (env COLOCD_GPU_SMS) to its SM count "+
		"(nvidia-smi does not show it; torch.cuda.get_device_properties(0).multi_processor_count does)",
		ErrUnknownSMs, name)
}

// resolveSMs applies the configuration override, then the table. source
// says where the count came from: "config" or "table".
func resolveSMs(name string, override int) (sms int, source string, err error) {
	if override > 0 {
		return override, "config", nil
	}
	n, err := SMCount(name)
	if err != nil {
		return 0, "", err
	}
	return n, "table", nil
}

// parseDeviceName splits an NVML device name into the model word and the
// form factor ("pcie", "sxm", "nvl" or ""). ok is false when a word is
// neither of these nor a memory size or type.
func parseDeviceName(name string) (model, form string, ok bool) {
	words := splitName(name)
	for len(words) > 0 && (words[0] == "nvidia" || words[0] == "tesla") {
		words = words[1:]
	}
	if len(words) == 0 {
		return "", "", false
	}
	model = words[0]
	for _, w := range words[1:] {
		var f string
		switch {
		case w == "pcie":
			f = "pcie"
		case w == "nvl":
			f = "nvl"
		case strings.HasPrefix(w, "sxm") && isDigits(w[len("sxm"):]) || w == "sxm":
			f = "sxm"
		case isMemoryWord(w):
			continue
		default:
			return "", "", false
		}
		if form != "" && form != f {
			return "", "", false
		}
		form = f
	}
	return model, form, true
}

// splitName lower-cases a device name and splits it at spaces, hyphens
// and underscores.
func splitName(name string) []string {
	return strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return r == ' ' || r == '-' || r == '_' || r == '\t'
	})
}

// cutGB returns the digits of a size word such as "80gb".
func cutGB(w string) (string, bool) {
	n, ok := strings.CutSuffix(w, "gb")
	return n, ok && isDigits(n)
}

// isMemoryWord reports words such as "80gb", "141gb", "hbm3" and "hbm3e".
func isMemoryWord(w string) bool {
	switch w {
	case "hbm2", "hbm2e", "hbm3", "hbm3e":
		return true
	}
	_, ok := cutGB(w)
	return ok
}
