package sidecar

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/configs"
)

// The admission controller's config as the sidecar makes it from the
// file (admissionConfig), and which of its keys a reload applies.

// TestAdmissionConfigDeadlineKeys: the decision's deadline and a lease's
// first term reach the controller.
func TestAdmissionConfigDeadlineKeys(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "gpu-a", 1000)
	cfg.Admission.DecisionTimeout = 3 * time.Second
	cfg.Admission.Lease.FirstTerm = 45 * time.Second
	a := admissionConfig(cfg, nil, "")
	if a.DecisionTimeout != 3*time.Second || a.Lease.FirstTerm != 45*time.Second {
		t.Errorf("decision timeout %s, first term %s; want 3s and 45s", a.DecisionTimeout, a.Lease.FirstTerm)
	}
}

// TestHotKeysAreWhatAdmissionApplies derives the keys a reload applies
// from what admission.Reconfigure changes, and checks them against
// configs.HotReloadable (which the watcher and docs/configuration.md use):
// each admission key, changed alone, reaches only hot fields of the
// admission config, and some; every key outside services and admission is
// for a restart.
func TestHotKeysAreWhatAdmissionApplies(t *testing.T) {
	t.Parallel()
	hot := admission.HotFields()
	base := configs.Default()
	adm := reflect.ValueOf(&base.Admission).Elem()
	var walk func(v reflect.Value, key string)
	walk = func(v reflect.Value, key string) {
		if v.Kind() == reflect.Struct {
			for i := range v.NumField() {
				walk(v.Field(i), key+"."+v.Type().Field(i).Tag.Get("mapstructure"))
			}
			return
		}
		t.Run(key, func(t *testing.T) {
			old := reflect.ValueOf(v.Interface())
			switch v.Kind() {
			case reflect.Int, reflect.Int64: // ints and durations
				v.SetInt(v.Int() + 1)
			case reflect.Float64:
				v.SetFloat(v.Float()/2 + 0.01)
			case reflect.Bool:
				v.SetBool(!v.Bool())
			case reflect.Slice: // a list of entries: one zero entry added
				v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
			default:
				t.Fatalf("admission key %s of kind %s: teach this test to change it", key, v.Kind())
			}
			defer v.Set(old)
			def := configs.Default()
			before, after := admissionConfig(&def, nil, ""), admissionConfig(&base, nil, "")
			var reached []string
			bv, av := reflect.ValueOf(before), reflect.ValueOf(after)
			for i := range bv.NumField() {
				if !reflect.DeepEqual(bv.Field(i).Interface(), av.Field(i).Interface()) {
					reached = append(reached, bv.Type().Field(i).Name)
				}
			}
			applied := len(reached) > 0
			for _, f := range reached {
				applied = applied && slices.Contains(hot, f)
			}
			if applied != configs.HotReloadable(key) {
				t.Errorf("%s reaches admission fields %v (hot: %v); configs.HotReloadable says %v", key, reached, hot, configs.HotReloadable(key))
			}
		})
	}
	walk(adm, "admission")
	for _, k := range configs.Keys() {
		if !strings.HasPrefix(k, "admission.") && k != "services" && configs.HotReloadable(k) {
			t.Errorf("%s is said to be hot, but only services and admission keys reach a running sidecar", k)
		}
	}
	// The reference's reload column says the same, for every key.
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for line := range strings.SplitSeq(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		key := strings.Trim(strings.TrimSpace(cells[1]), "`")
		reload := strings.TrimSpace(cells[len(cells)-2])
		if reload != "hot" && reload != "restart" {
			continue
		}
		seen[key] = true
		if want := configs.HotReloadable(key); (reload == "hot") != want {
			t.Errorf("docs/configuration.md: %s is %q, but a reload applies it: %v", key, reload, want)
		}
	}
	for _, k := range configs.Keys() {
		if !seen[k] && !strings.HasPrefix(k, "services") {
			t.Errorf("docs/configuration.md has no row for %s", k)
		}
	}
}
