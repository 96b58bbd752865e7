package deploy

import (
	"os/exec"
	"strings"
	"testing"
)

// The alerting rules, read and exercised by promtool: check rules, and
// test rules against colocd-rules.test.yaml (each alert fires when it
// should and not when it should not).
func TestPrometheusRulesWithPromtool(t *testing.T) {
	promtool := tool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "colocd-rules.yaml"},
		{"test", "rules", "colocd-rules.test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			continue
		}
		t.Logf("promtool %s: %s", strings.Join(args, " "), strings.Join(strings.Fields(string(out)), " "))
	}
}
