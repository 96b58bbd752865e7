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
		h.Float64(op.DurUS)
		h.Float64(op.GapUS)
		h.Float64(op.SM)
		h.Float64(op.Occupancy)
		h.OptFloat64(op.DRAM)
		h.OptFloat64(op.L2)
		h.Float64(op.Waves)
	}
	h.Bool(p.Summary != nil)
	if s := p.Summary; s != nil {
		h.Float64(s.LatencyMS)
		h.Float64(s.IterationMS)
		h.Float64(s.GPUUtil)
		h.Float64(s.MemUtil)
		h.Float64(s.KernelUS)
		h.Float64(s.SMUtil)
	}
	return h.Sum()
}
