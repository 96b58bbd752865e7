package predictor

import "github.com/colocd/colocd/internal/digest"

// ProfileKey is a content hash of the parts of a profile that a prediction
// depends on; two profiles with the same key predict the same.
type ProfileKey = digest.Key

// Key hashes every field of the profile but Notes and Source, which are for
// readers and change no prediction (key_test.go walks the struct, so a new
// field fails a test until it is listed here or there). It walks every op:
// compute it once per profile and keep it beside the profile.
func (p *Profile) Key() ProfileKey {
	var h digest.Hasher
	h.String(p.Format)
	h.String(p.Name)
	h.String(string(p.Kind))
	h.String(p.Device.Name)
	h.Int(p.Device.SMs)
	h.Float64(p.MemoryMiB)
	h.Int(len(p.Ops))
	for i := range p.Ops {
		op := &p.Ops[i]
		h.String(op.Name)
		hashFloats(&h, op.DurUS, op.GapUS, op.SM, op.Occupancy)
		h.OptFloat64(op.DRAM)
		h.OptFloat64(op.L2)
		h.Float64(op.Waves)
	}
	h.Bool(p.Summary != nil)
	if s := p.Summary; s != nil {
		hashFloats(&h, s.LatencyMS, s.IterationMS, s.GPUUtil, s.MemUtil, s.KernelUS, s.SMUtil, s.BlockUS, s.FullSMShare)
	}
	return h.Sum()
}

// hashFloats hashes vs in order, as one h.Float64 call each.
func hashFloats(h *digest.Hasher, vs ...float64) {
	for _, v := range vs {
		h.Float64(v)
	}
}
