package gpu

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSelector(t *testing.T) {
	t.Parallel()
	const uuid = "GPU-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40"
	tests := []struct {
		name    string
		in      string
		want    Selector
		wantErr string // in the error; "" for success
	}{
		{name: "index 0", in: "0", want: Selector{Index: 0}},
		{name: "index 7", in: "7", want: Selector{Index: 7}},
		{name: "largest index", in: "255", want: Selector{Index: 255}},
		{name: "spaces", in: " 3\t", want: Selector{Index: 3}},
		{name: "uuid", in: uuid, want: Selector{UUID: uuid}},
		{name: "upper-case uuid", in: strings.ToUpper(uuid), want: Selector{UUID: uuid}},
		{name: "lower-case prefix", in: "gpu-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40", want: Selector{UUID: uuid}},
		{name: "empty", in: "", wantErr: "empty"},
		{name: "index too big", in: "256", wantErr: "above 255"},
		{name: "huge index", in: "99999999999999999999999", wantErr: "above 255"},
		{name: "negative", in: "-1", wantErr: "neither"},
		{name: "plus sign", in: "+1", wantErr: "neither"},
		{name: "leading zero", in: "01", wantErr: "leading zero"},
		{name: "list", in: "0,1", wantErr: "neither"},
		{name: "short uuid", in: "GPU-5e2c9f1a", wantErr: "8-4-4-4-12"},
		{name: "non-hex uuid", in: "GPU-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f4g", wantErr: "8-4-4-4-12"},
		{name: "uuid without prefix", in: "5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40", wantErr: "neither"},
		{name: "mig uuid", in: "MIG-5E2C9F1A-0b1c-4d2e-8f3a-9b8c7d6e5f40", want: Selector{UUID: "MIG-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40"}},
		{name: "mig triple", in: "0:1:0", want: Selector{Index: 0, Instance: true, GI: 1, CI: 0}},
		{name: "mig triple by gpu uuid", in: uuid + ":13:2", want: Selector{UUID: uuid, Instance: true, GI: 13, CI: 2}},
		{name: "nvidia's mig form", in: "MIG-GPU-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40/1/0", want: Selector{UUID: uuid, Instance: true, GI: 1}},
		{name: "short mig uuid", in: "MIG-5e2c9f1a", wantErr: "after MIG-"},
		{name: "two parts", in: "0:1", wantErr: "three parts"},
		{name: "four parts", in: "0:1:0:0", wantErr: "three parts"},
		{name: "bad gi", in: "0:x:0", wantErr: "GPU instance id must be a number"},
		{name: "gi too big", in: "0:64:0", wantErr: "GPU instance id above 63"},
		{name: "ci with a leading zero", in: "0:1:00", wantErr: "compute instance id must be a number"},
		{name: "mig uuid in a triple", in: "MIG-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40:1:0", wantErr: "give it alone"},
		{name: "nvidia's mig form without ids", in: "MIG-GPU-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40", wantErr: "MIG-GPU-<uuid>/<gi>/<ci>"},
		{name: "nvidia's mig form with colons", in: "MIG-GPU-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40:1:0", wantErr: "MIG-GPU-<uuid>/<gi>/<ci>"},
		{name: "nvidia's mig form, mixed", in: "mig-gpu-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40/1:0", wantErr: "MIG-GPU-<uuid>/<gi>/<ci>"},
		{name: "bad gpu in a triple", in: "256:1:0", wantErr: "above 255"},
		{name: "newline", in: "0\nquit", wantErr: "neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSelector(tt.in)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidSelector) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSelector(%q) = %+v, %v; want ErrInvalidSelector with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSelector(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			if got.IsUUID() != (tt.want.UUID != "") {
				t.Errorf("IsUUID() = %v", got.IsUUID())
			}
			if got.IsMIG() != (tt.want.Instance || strings.HasPrefix(tt.want.UUID, "MIG-")) {
				t.Errorf("IsMIG() = %v", got.IsMIG())
			}
		})
	}
}

// FuzzParseSelector checks that any input either fails with
// ErrInvalidSelector or yields a selector that prints and parses back to
// itself, holding a valid index or a lower-case UUID.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"0", "255", "256", "01", " 3 ", "-1", "", "GPU-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40",
		"gpu-5E2C9F1A-0B1C-4D2E-8F3A-9B8C7D6E5F40", "MIG-x", "GPU-", "GPU-----", "\u212a",
		"MIG-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40", "0:1:0", "7:63:64", "MIG-GPU-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40/1/0", "0::0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		sel, err := ParseSelector(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidSelector) {
				t.Fatalf("ParseSelector(%q) error %v is not ErrInvalidSelector", in, err)
			}
			return
		}
		if sel.IsUUID() {
			gpu, mig := strings.HasPrefix(sel.UUID, "GPU-"), strings.HasPrefix(sel.UUID, "MIG-")
			if !gpu && !mig || mig && sel.Instance || len(sel.UUID) != 40 || sel.UUID[4:] != strings.ToLower(sel.UUID[4:]) || sel.Index != 0 {
				t.Fatalf("ParseSelector(%q) = %+v: malformed UUID", in, sel)
			}
		} else if sel.Index < 0 || sel.Index > MaxIndex {
			t.Fatalf("ParseSelector(%q) = %+v: index out of range", in, sel)
		}
		if !sel.Instance && (sel.GI != 0 || sel.CI != 0) || sel.GI < 0 || sel.GI > MaxInstanceID || sel.CI < 0 || sel.CI > MaxInstanceID {
			t.Fatalf("ParseSelector(%q) = %+v: instance ids out of range", in, sel)
		}
		if hasPrefixFold(strings.TrimSpace(in), "MIG-") && !sel.IsMIG() {
			t.Fatalf("ParseSelector(%q) = %+v: a MIG- selector that names a whole GPU", in, sel)
		}
		back, err := ParseSelector(sel.String())
		if err != nil || back != sel {
			t.Fatalf("ParseSelector(%q) = %+v, but its String %q parses to %+v, %v", in, sel, sel.String(), back, err)
		}
	})
}
