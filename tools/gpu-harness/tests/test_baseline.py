"""accuracy.py's naive baseline: solo measurement times one constant per
mode and field, fitted on the other folds (no colocd needed)."""

import json
import os
import tempfile
import unittest

import testlib  # noqa: F401  (puts the harness on sys.path)
import accuracy


def record(inf, train, mode, rate, lat_mean, it):
    return {"name": "%s+%s@%s" % (inf, train, mode), "mode": mode, "rate_rps": rate,
            "_inference_name": inf, "_training_names": [train],
            "measured": {"latency_ms": {"mean": lat_mean}, "training_iteration_ms": it}}


class Baseline(unittest.TestCase):
    def test_constant_from_the_other_folds(self):
        solo = {"inference": {("a", 10.0): {"latency_ms": {"mean": 2.0}}, ("b", 20.0): {"latency_ms": {"mean": 4.0}}},
                "training": {"x": 100.0, "y": 50.0, "z": 10.0}}
        doc = {"records": [
            record("a", "x", "mps", 10.0, 4.0, 150.0),   # ratios 2.0, 1.5
            record("b", "y", "mps", 20.0, 12.0, 100.0),  # ratios 3.0, 2.0
            record("a", "z", "mps", 10.0, 5.0, 40.0),    # ratios 2.5, 4.0
            record("b", "z", "timeslice", 20.0, 8.0, 20.0),
        ]}
        b = accuracy.baseline(doc, solo, "training")
        # fold x: mps latency ratio median of (3.0, 2.5) = 2.75; iteration median of (2.0, 4.0) = 3.0
        self.assertAlmostEqual(b[0]["latency_ms.mean"], 2.0 * 2.75)
        self.assertAlmostEqual(b[0]["training_iteration_ms[0]"], 100.0 * 3.0)
        # fold z: its own records never set its constant (mps: ratios 2.0 and 3.0 of x and y)
        self.assertAlmostEqual(b[2]["latency_ms.mean"], 2.0 * 2.5)
        # a mode whose only records are in the left-out fold has no constant: no prediction
        self.assertIsNone(b[3]["latency_ms.mean"])

    def test_solo_from_run_json(self):
        d = tempfile.mkdtemp()
        run = {"solo": {"x": {"iteration_ms": {"mean": 30.0}},
                        "a": {"at_load": {"0.30": {"rate_rps": 62.2, "latency_ms": {"mean": 7.0, "p99": 19.0}}}}}}
        with open(os.path.join(d, "run.json"), "w") as f:
            json.dump(run, f)
        solo = accuracy.load_solo(os.path.join(d, "measurements.json"))
        self.assertEqual(solo["training"], {"x": 30.0})
        r = {"_inference_name": "a", "rate_rps": 62.2, "_training_names": ["x"]}
        self.assertEqual(accuracy.solo_reference(solo, r, "latency_ms.p99"), 19.0)
        self.assertEqual(accuracy.solo_reference(solo, r, "training_iteration_ms[0]"), 30.0)
        self.assertIsNone(accuracy.solo_reference(solo, dict(r, rate_rps=1.0), "latency_ms.p99"))
        self.assertIsNone(accuracy.load_solo(os.path.join(d, "elsewhere", "measurements.json")))


if __name__ == "__main__":
    unittest.main()
