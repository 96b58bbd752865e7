package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/testfiles"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestKubernetesJobIsAColocdRun: every Job of the Kubernetes examples runs
// its training under colocd run, with a command line this CLI accepts
// (flags, values, the command after --), placing on its own node.
func TestKubernetesJobIsAColocdRun(t *testing.T) {
	t.Parallel()
	jobs := 0
	for _, doc := range strings.Split(testfiles.Read(t, "deploy/kubernetes/vllm-with-colocd.yaml"), "\n---\n") {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind != "Job" {
			continue
		}
		var job batchv1.Job
		if err := yaml.UnmarshalStrict([]byte(doc), &job); err != nil {
			t.Fatal(err)
		}
		jobs++
		for _, c := range job.Spec.Template.Spec.Containers {
			argv := append(slices.Clone(c.Command), c.Args...)
			cmd, err := parseRunLine(argv)
			if err != nil {
				t.Errorf("Job %s, container %s: %q: %v", job.Name, c.Name, argv, err)
				continue
			}
			if p, _ := cmd.Flags().GetBool("place"); p {
				hasNode := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
					return e.Name == envNode && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
				})
				if !hasNode {
					t.Errorf("Job %s: --place without %s from spec.nodeName: it may be placed on another node's GPU", job.Name, envNode)
				}
			}
		}
	}
	if jobs == 0 {
		t.Fatal("no Job in the example")
	}
}
