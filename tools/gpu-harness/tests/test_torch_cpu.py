"""The real torch code on the CPU, at tiny sizes: skipped where torch is
absent (the development machine; the GPU machine has it). Run it with an
interpreter that has torch, e.g. `python3 -m unittest discover -s
tools/gpu-harness/tests` on the GPU box, or Debian's python3-torch here."""

import gzip
import json
import os
import tempfile
import unittest

import testlib  # noqa: F401

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class TorchCPU(unittest.TestCase):
    def test_every_workload_steps(self):
        import workloads
        workloads.configure("tf32", "cpu")
        for n in workloads.names():
            if workloads.SPECS[n]["model"] == "spin":
                with self.assertRaises(ValueError):  # CuPy kernels: CUDA only
                    workloads.make(n, device="cpu")
                continue
            w = workloads.make(n, device="cpu", scale="tiny").build()
            w.step()
            w.step()
            w.sync()
            self.assertGreater(w.params, 0)
            self.assertEqual(w.info()["batch"], workloads.TINY["batch"])

    def test_full_size_parameter_counts(self):
        # The full models have the published sizes (built on the CPU, no step).
        import workloads
        want = {"resnet50-infer": 25557032, "gpt-decode": 124439808}
        for n, params in want.items():
            w = workloads.make(n, device="cpu").build()
            self.assertEqual(w.params, params, n)

    def test_profile_has_units(self):
        import argparse
        import worker
        args = argparse.Namespace(device="cpu", precision="tf32", scale="tiny", seed=0, warmup_requests=1,
                                  warmup_iters=1)
        b = worker.TorchBackend(args)
        b.init(["bert-infer", "gpt2-train"])
        d = tempfile.mkdtemp()
        for n, want in (("bert-infer", "request"), ("gpt2-train", "ProfilerStep#")):
            path = os.path.join(d, n + ".json.gz")
            b.profile(n, path, 3)
            with gzip.open(path, "rt") as f:
                doc = json.load(f)
            names = [e.get("name", "") for e in doc["traceEvents"]]
            self.assertGreaterEqual(sum(1 for x in names if x.startswith(want)), 3, n)


if __name__ == "__main__":
    unittest.main()
