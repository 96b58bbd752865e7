package launch

import (
	"strings"
	"testing"

	"github.com/colocd/colocd/bus"
)

// A quote's joint allocation is printed under its row: each live job's
// percentage and speed now and after, the job's own, and the weighted
// throughput. A job id from the wire loses its control characters.
func TestWriteJointCost(t *testing.T) {
	var b strings.Builder
	WriteJointCost(&b, &bus.Joint{Prices: bus.JointPrices{SLO: 1.39}, WeightedThroughput: 2.163, WeightedThroughputBefore: 0.789,
		Jobs: []bus.JointJob{
			{JobID: "job-a\x1b[2J", LeaseID: "L1", Weight: 1, Pct: 10, WasPct: 100, Throughput: 0.07, WasThroughput: 0.79},
			{JobID: "job-b", Weight: 3, Pct: 90, Throughput: 0.7},
		}})
	want := "\t\t  job job-a[2J: 100 % → 10 %, 79 % → 7 % of its solo speed (weight 1)\n" +
		"\t\t  this job: 90 %, 70 % of its solo speed (weight 3)\n" +
		"\t\t  weighted throughput: 0.789 → 2.163 (SLO slack priced at 1.39)\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	b.Reset()
	WriteJointCost(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no joint allocation printed %q", b.String())
	}
}
