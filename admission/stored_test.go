package admission

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/colocd/colocd/predictor"
)

// Every field of Lease survives the lease store's record: a
// field added to the lease and not to StoredLease (or to one direction of
// the conversion) is lost at the first restart, which no other test sees.
// The lease is filled by reflection, each field with a value of its own.
func TestStoredLeaseRoundTrip(t *testing.T) {
	t.Parallel()
	var l Lease
	v := reflect.ValueOf(&l).Elem()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range v.NumField() {
		fill(t, v.Field(i), v.Type().Field(i).Name, i+1, at.Add(time.Duration(i)*time.Minute))
	}
	const rev = 42
	l.Revision = rev // the store's, not the record's: Lease(rev) sets it
	raw, err := json.Marshal(NewStoredLease(&l))
	if err != nil {
		t.Fatal(err)
	}
	var sl StoredLease
	if err := json.Unmarshal(raw, &sl); err != nil {
		t.Fatal(err)
	}
	got, err := sl.Lease(rev)
	if err != nil {
		t.Fatal(err)
	}
	gv := reflect.ValueOf(got).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if !reflect.DeepEqual(gv.Field(i).Interface(), v.Field(i).Interface()) {
			t.Errorf("Lease.%s: stored %v, read back %v", name, v.Field(i).Interface(), gv.Field(i).Interface())
		}
	}
}

// fill sets f (named name) to a value that is not its zero one, made of
// n and at.
func fill(t *testing.T, f reflect.Value, name string, n int, at time.Time) {
	t.Helper()
	switch x := f.Addr().Interface().(type) {
	case *time.Time:
		*x = at
		return
	case *time.Duration:
		*x = time.Duration(n) * time.Second
		return
	case *[32]byte:
		for i := range x {
			x[i] = byte(n + i)
		}
		return
	case **predictor.Profile:
		*x = &predictor.Profile{Format: "colocd.profile/v1", Name: "job", Kind: predictor.KindTraining, MemoryMiB: 512,
			Ops: []predictor.Op{{Name: "gemm", DurUS: 100}}}
		return
	case *[]time.Time:
		*x = []time.Time{at}
		return
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(name + "-value")
	case reflect.Int, reflect.Int64:
		f.SetInt(int64(n))
	case reflect.Uint64:
		f.SetUint(uint64(n))
	case reflect.Float64:
		f.SetFloat(float64(n) + 0.5)
	case reflect.Bool:
		f.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(f.Type(), 1, 1)
		fill(t, s.Index(0), name+"[0]", n, at)
		f.Set(s)
	case reflect.Pointer:
		p := reflect.New(f.Type().Elem())
		fill(t, p.Elem(), name, n, at)
		f.Set(p)
	case reflect.Struct:
		for i := range f.NumField() {
			fill(t, f.Field(i), name+"."+f.Type().Field(i).Name, n+i, at.Add(time.Duration(i)*time.Second))
		}
	default:
		t.Fatalf("Lease.%s: a %s this test cannot fill: teach it", name, f.Type())
	}
}
