// Package ncu imports an NVIDIA Nsight Compute CSV export (ncu --csv) as a
// workload profile: each profiled kernel becomes an op with the figures
// the Kineto importer has to estimate or leave out, measured: its SM fill,
// rounds of thread blocks, achieved occupancy and DRAM and L2 throughput.
package ncu

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/colocd/colocd/predictor"
)

// The metrics read, by their Nsight Compute names; every other one is
// ignored. Only the duration is required.
const (
	MetricDuration  = "gpu__time_duration.sum"
	MetricBlocks    = "launch__grid_size"
	MetricSMs       = "launch__sm_count"
	MetricWaves     = "launch__waves_per_multiprocessor"
	MetricOccupancy = "sm__warps_active.avg.pct_of_peak_sustained_active"
	MetricDRAM      = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
	MetricDRAMAlt   = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
	MetricL2        = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
)

// Bounds on what a file may hold, so that no export can make the import
// run without end or hold unbounded memory.
const (
	MaxKernels  = 100_000
	MaxRows     = 20_000_000
	MaxFieldLen = 64 << 10
)

// ErrInvalidExport is wrapped by every error about a file that is not a
// usable Nsight Compute CSV export.
var ErrInvalidExport = errors.New("invalid Nsight Compute export")

// Kernel is one profiled kernel launch. A figure the export does not give
// is NaN.
type Kernel struct {
	// ID is Nsight Compute's launch id: kernels are in launch order by it.
	ID int
	// Name is the kernel's name, cut to predictor.KernelNameMax bytes.
	Name string
	// DurUS is the kernel's duration, µs, as profiled alone.
	DurUS float64
	// Blocks in its grid, and the device's SM count.
	Blocks, SMs float64
	// Waves is its rounds of thread blocks per SM (below 1: a partial
	// round).
	Waves float64
	// Occupancy, DRAM and L2 are fractions: achieved occupancy, and DRAM
	// and L2 throughput over their peaks.
	Occupancy, DRAM, L2 float64
}

// Parse reads an Nsight Compute CSV export: the long form (ncu --csv, one
// row per kernel and metric, with "ID", "Kernel Name", "Metric Name",
// "Metric Unit" and "Metric Value" columns), or the raw page (ncu --csv
// --page raw: one row per kernel, a column per metric, and a row of units
// below the header). Lines before the header that are not CSV (ncu's
// "==PROF==" messages) are skipped. Kernels come back in ID order.
func Parse(r io.Reader) ([]Kernel, error) {
	br := bufio.NewReader(r)
	// Skip ncu's own messages up to the header line.
	var header string
	for {
		line, err := br.ReadString('\n')
		if len(line) > MaxFieldLen {
			return nil, invalid("a line of %d bytes before the header, longer than %d", len(line), MaxFieldLen)
		}
		if t := strings.TrimSpace(line); strings.HasPrefix(t, `"`) || strings.HasPrefix(t, "ID,") {
			header = line
			break
		}
		if err == io.EOF {
			return nil, invalid("no CSV header (a line starting with \"ID\"); run ncu with --csv")
		}
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
	}
	cr := csv.NewReader(io.MultiReader(strings.NewReader(header), br))
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return nil, invalid("the header: %v", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(h)] = i
	}
	if _, ok := col["ID"]; !ok {
		return nil, invalid("the header has no \"ID\" column")
	}
	t := &table{cr: cr, col: col, kernels: map[int]*Kernel{}}
	if _, long := col["Metric Name"]; long {
		err = t.long()
	} else {
		err = t.raw(head)
	}
	if err != nil {
		return nil, err
	}
	if len(t.kernels) == 0 {
		return nil, invalid("no kernel rows")
	}
	out := make([]Kernel, 0, len(t.kernels))
	for _, k := range t.kernels {
		if math.IsNaN(k.DurUS) {
			return nil, invalid("kernel %d (%s) has no %s: profile with --metrics %s (or a section that has it)", k.ID, k.Name, MetricDuration, MetricDuration)
		}
		out = append(out, *k)
	}
	slices.SortFunc(out, func(a, b Kernel) int { return a.ID - b.ID })
	return out, nil
}

// table gathers kernels from an export's rows.
type table struct {
	cr      *csv.Reader
	col     map[string]int
	kernels map[int]*Kernel
	rows    int
}

// next returns the next row, or nil at the end. ncu's own messages
// (==PROF== Disconnected …) may follow the table: they are skipped, and
// count towards MaxRows like any row.
func (t *table) next() ([]string, error) {
	for {
		rec, err := t.cr.Read()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, invalid("%v", err)
		}
		if t.rows++; t.rows > MaxRows {
			return nil, invalid("more than %d rows", MaxRows)
		}
		if len(rec) > 0 && strings.HasPrefix(rec[0], "==") {
			continue
		}
		for _, f := range rec {
			if len(f) > MaxFieldLen {
				return nil, invalid("row %d: a field of %d bytes, longer than %d", t.rows, len(f), MaxFieldLen)
			}
		}
		return rec, nil
	}
}

func (t *table) field(rec []string, name string) string {
	if i, ok := t.col[name]; ok && i < len(rec) {
		return strings.TrimSpace(rec[i])
	}
	return ""
}

// kernel returns the kernel of a row (by its ID), added when new.
func (t *table) kernel(rec []string) (*Kernel, error) {
	idText := t.field(rec, "ID")
	id, err := strconv.Atoi(idText)
	if err != nil || id < 0 {
		return nil, invalid("row %d: ID %q, want a launch id ≥ 0", t.rows, idText)
	}
	if k := t.kernels[id]; k != nil {
		return k, nil
	}
	if len(t.kernels) >= MaxKernels {
		return nil, invalid("more than %d kernels", MaxKernels)
	}
	nan := math.NaN()
	k := &Kernel{ID: id, Name: predictor.ShortKernelName(t.field(rec, "Kernel Name")), DurUS: nan, Blocks: nan, SMs: nan, Waves: nan, Occupancy: nan, DRAM: nan, L2: nan}
	t.kernels[id] = k
	return k, nil
}

// long reads the long form: one metric a row.
func (t *table) long() error {
	for _, c := range []string{"Metric Unit", "Metric Value"} {
		if _, ok := t.col[c]; !ok {
			return invalid("the header has \"Metric Name\" but no %q column", c)
		}
	}
	for {
		rec, err := t.next()
		if rec == nil || err != nil {
			return err
		}
		name := t.field(rec, "Metric Name")
		if !wanted(name) {
			continue
		}
		k, err := t.kernel(rec)
		if err != nil {
			return err
		}
		if err := k.set(name, t.field(rec, "Metric Unit"), t.field(rec, "Metric Value")); err != nil {
			return invalid("row %d, kernel %d: %v", t.rows, k.ID, err)
		}
	}
}

// raw reads the raw page: a column per metric, and the units in the row
// below the header (its ID empty).
func (t *table) raw(head []string) error {
	var metrics []int
	for i, h := range head {
		if wanted(strings.TrimSpace(h)) {
			metrics = append(metrics, i)
		}
	}
	if len(metrics) == 0 {
		return invalid("the header names no metric colocd reads (want at least %s)", MetricDuration)
	}
	units := make([]string, len(head))
	for {
		rec, err := t.next()
		if rec == nil || err != nil {
			return err
		}
		if t.field(rec, "ID") == "" { // the units row
			for _, i := range metrics {
				if i < len(rec) {
					units[i] = strings.TrimSpace(rec[i])
				}
			}
			continue
		}
		k, err := t.kernel(rec)
		if err != nil {
			return err
		}
		for _, i := range metrics {
			if i >= len(rec) {
				continue
			}
			if err := k.set(strings.TrimSpace(head[i]), units[i], strings.TrimSpace(rec[i])); err != nil {
				return invalid("row %d, kernel %d: %v", t.rows, k.ID, err)
			}
		}
	}
}

func wanted(metric string) bool {
	switch metric {
	case MetricDuration, MetricBlocks, MetricSMs, MetricWaves, MetricOccupancy, MetricDRAM, MetricDRAMAlt, MetricL2:
		return true
	}
	return false
}

// set records one metric's value in its unit. An empty value or "n/a"
// leaves the figure unknown.
func (k *Kernel) set(metric, unit, text string) error {
	if text == "" || strings.EqualFold(text, "n/a") {
		return nil
	}
	v, err := number(text)
	if err != nil {
		return fmt.Errorf("%s: %w", metric, err)
	}
	if v < 0 {
		return fmt.Errorf("%s: %q, want a value ≥ 0", metric, text)
	}
	switch metric {
	case MetricDuration:
		us, err := toUS(v, unit)
		if err != nil {
			return fmt.Errorf("%s: %w", metric, err)
		}
		k.DurUS = us
	case MetricBlocks:
		k.Blocks = v
	case MetricSMs:
		k.SMs = v
	case MetricWaves:
		k.Waves = v
	default: // the percentages
		if unit != "" && unit != "%" {
			return fmt.Errorf("%s: unit %q, want %%", metric, unit)
		}
		f := min(1, math.Round(v*1e4)/1e6) // a fraction, to a millionth
		switch metric {
		case MetricOccupancy:
			k.Occupancy = f
		case MetricDRAM, MetricDRAMAlt:
			if math.IsNaN(k.DRAM) || metric == MetricDRAM {
				k.DRAM = f
			}
		case MetricL2:
			k.L2 = f
		}
	}
	return nil
}

// thousands is a number written with thousands separators: 1,234,567.8.
var thousands = regexp.MustCompile(`^\d{1,3}(,\d{3})+(\.\d*)?$`)

// number parses a value as ncu writes it in any locale: 1234.5,
// 1,234.5 (thousands separators), or 1234,5 (a decimal comma).
func number(text string) (float64, error) {
	s := text
	switch {
	case thousands.MatchString(s):
		s = strings.ReplaceAll(s, ",", "")
	case strings.Count(s, ",") == 1 && !strings.Contains(s, "."):
		s = strings.Replace(s, ",", ".", 1)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q, want a finite number", text)
	}
	return v, nil
}

// toUS converts a duration in an ncu time unit to µs.
func toUS(v float64, unit string) (float64, error) {
	switch strings.ToLower(unit) {
	case "nsecond", "ns":
		return v / 1000, nil
	case "usecond", "us", "µs":
		return v, nil
	case "msecond", "ms":
		return v * 1000, nil
	case "second", "s":
		return v * 1e6, nil
	}
	return 0, fmt.Errorf("unit %q, want nsecond, usecond, msecond or second", unit)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidExport, fmt.Sprintf(format, args...))
}
