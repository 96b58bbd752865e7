package main

import (
	"bytes"
	"os"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestKubernetesJobIsAColocdRun: every Job of the Kubernetes examples runs
// its training under colocd run, with a command line this CLI accepts
// (flags, values, the command after --), placing on its own node.
func TestKubernetesJobIsAColocdRun(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../deploy/kubernetes/vllm-with-colocd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	jobs := 0
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil || meta.Kind != "Job" {
			continue
		}
		var job batchv1.Job
		if err := yaml.UnmarshalStrict(doc, &job); err != nil {
			t.Fatal(err)
		}
		jobs++
		for _, c := range job.Spec.Template.Spec.Containers {
			argv := append(slices.Clone(c.Command), c.Args...)
			if len(argv) < 2 || argv[0] != "colocd" || argv[1] != "run" {
				t.Errorf("Job %s, container %s: %q is not a colocd run", job.Name, c.Name, argv)
				continue
			}
			root := newRootCmd()
			cmd, args, err := root.Find(argv[1:])
			if err != nil || cmd.Name() != "run" {
				t.Fatalf("find run: %v", err)
			}
			if err := cmd.ParseFlags(args); err != nil {
				t.Errorf("Job %s: colocd run does not take its flags: %v", job.Name, err)
				continue
			}
			if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
				t.Errorf("Job %s: %v", job.Name, err)
			}
			if cmd.ArgsLenAtDash() < 0 || len(cmd.Flags().Args()) == 0 {
				t.Errorf("Job %s: no command after --", job.Name)
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
