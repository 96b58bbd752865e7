"""The harness's files through the real colocd binary (built with go; the
tests skip without go): a synthetic dataset of hand-made profiles is
accepted by `colocd profile validate` and `colocd calibrate`, and
accuracy.py produces its leave-one-workload-out table on it."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

import testlib
import accuracy
import core


class ArrivalsMatchColocd(unittest.TestCase):
    """The harness serves the arrivals colocd simulates: with no training,
    colocd's latency is the FIFO queue over its arrivals, so the same
    queue over core.poisson_offsets must give the same percentiles."""

    def test_same_queue(self):
        colocd = testlib.colocd_binary()
        if not colocd:
            self.skipTest("go is not on PATH: cannot build colocd")
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        prof = os.path.join(d, "one.json")
        core.write_json_atomic(prof, {"format": core.PROFILE_FORMAT, "name": "one", "kind": "inference",
                                      "ops": [{"dur_us": 1000.0, "gap_us": 0.0, "sm": 1.0, "occupancy": 1.0}]})
        for rate, n, seed in ((600.0, 500, 42), (150.5, 237, 1007)):
            p = subprocess.run([colocd, "predict", "--inference", prof, "--rate", repr(rate), "--requests", str(n),
                                "--seed", str(seed), "--json"], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            got = json.loads(p.stdout)["inference"]["solo_latency_ms"]
            free, lat = 0.0, []
            for a in core.poisson_offsets(rate, n, seed):
                free = max(a * 1e6, free) + 1000.0
                lat.append((free - a * 1e6) / 1e3)
            want = core.summarize(lat, ndigits=12)
            for k in core.PERCENTILE_KEYS:
                self.assertAlmostEqual(got[k], want[k], delta=1e-6 * want[k], msg=(rate, k))


class Synthetic(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.colocd = testlib.colocd_binary()
        if not cls.colocd:
            raise unittest.SkipTest("go is not on PATH: cannot build colocd")
        cls.dir = tempfile.mkdtemp(prefix="harness-synth-")
        # Small and matched (same requests and seed as the fit) so that the
        # truth is recoverable and the tests stay fast on two cores.
        p = testlib.run_py("synth.py", "--colocd", cls.colocd, "--out", cls.dir, "--training",
                           "syn-train-x,syn-train-y", "--timeslice-loads", "0.3", "--mps-pcts", "100,50",
                           "--requests", "200", "--seed", "1")
        if p.returncode != 0:
            raise RuntimeError(p.stderr)
        cls.meas = os.path.join(cls.dir, "measurements.json")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_marked_synthetic(self):
        with open(self.meas) as f:
            doc = json.load(f)
        self.assertTrue(doc["source"].startswith("SYNTHETIC"))
        self.assertEqual(len(doc["records"]), 12)
        self.assertEqual(core.check_measurements(doc), [])

    def test_profiles_validate(self):
        d = os.path.join(self.dir, "profiles")
        files = [os.path.join(d, f) for f in sorted(os.listdir(d))]
        p = subprocess.run([self.colocd, "profile", "validate"] + files, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("ok "), 5)

    def test_calibrate_accepts(self):
        out = os.path.join(self.dir, "cal.json")
        p = subprocess.run([self.colocd, "calibrate", "--measurements", self.meas, "--out", out, "--no-cv",
                            "--requests", "200"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("time slicing: slice", p.stdout)
        self.assertIn("mps: contention", p.stdout)
        with open(out) as f:
            cal = json.load(f)
        self.assertIn("measurements: SYNTHETIC", cal["source"])

    def test_calibrate_rejects_a_broken_file(self):
        with open(self.meas) as f:
            doc = json.load(f)
        doc["records"][0]["measured"]["latency_ms"]["p42"] = 1.0
        bad = os.path.join(self.dir, "bad.json")
        with open(bad, "w") as f:
            json.dump(doc, f)
        self.assertTrue(core.check_measurements(doc))
        p = subprocess.run([self.colocd, "calibrate", "--measurements", bad, "--out", bad + ".cal", "--no-cv"],
                           capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("p42", p.stderr)

    def test_accuracy_leave_one_workload_out(self):
        # Two seeds per record: the averaging runs, in calibrate's order
        # (the consistency check below is exact), at two thirds of the
        # default's cost.
        doc = accuracy.load_doc(self.meas)
        try:
            res = accuracy.evaluate(doc, self.colocd, by="training", requests=200, seed=1, check=True, seeds=2)
        finally:
            shutil.rmtree(doc["_tmp"], ignore_errors=True)
        self.assertEqual([f["left_out"] for f in res["folds"]], ["syn-train-x", "syn-train-y"])
        self.assertTrue(all(f["trained_on"] == 6 for f in res["folds"]))
        # predict reproduces calibrate's own simulation exactly
        self.assertEqual(res["consistency"]["max_rel_diff"], 0.0)
        self.assertGreater(res["consistency"]["compared"], 100)
        # every record predicted by a fold that never saw its trainer
        self.assertTrue(all("error" not in r for r in res["records"]), res["records"])
        ts = res["full_fit"]["timeslice"]
        self.assertAlmostEqual(ts["slice_us"], 1500, delta=150)
        for mode in ("timeslice", "mps"):
            m = res["mape"][mode]
            self.assertEqual(m["predicted"], m["records"])
            self.assertLess(m["all"]["mape"], 0.08, m)
            self.assertLess(m["latency_ms.mean"]["mape"], 0.08, m)
        # every predicted p99 carries its interval, and the coverage counts them
        for mode in ("timeslice", "mps"):
            c = res["coverage"][mode]["latency_ms.p99"]
            self.assertEqual(c["n"], res["mape"][mode]["records"])
            self.assertLessEqual(c["covered"] + c["above"], c["n"])
            ws = sorted((x["interval"][1] - x["interval"][0]) / x["predicted"]
                        for r in res["records"] if r["mode"] == mode
                        for x in r["metrics"] if x["field"] == "latency_ms.p99")
            self.assertAlmostEqual(c["median_width"], core.quantile_sorted(ws, 0.5))
            self.assertGreater(c["median_width"], 0)
        for r in res["records"]:
            m = {x["field"]: x for x in r["metrics"]}["latency_ms.p99"]
            self.assertLessEqual(m["interval"][0], m["interval"][1])
            self.assertEqual(m["covered"], m["interval"][0] <= m["measured"] <= m["interval"][1])
        text = accuracy.report(res)
        for want in ("record", "meas mean", "pred p99", "MAPE, left-out predictions", "timeslice", "mps 50%",
                     "90 % intervals"):
            self.assertIn(want, text)
        md = accuracy.table(res, markdown=True)
        self.assertTrue(md.startswith("| record |"))

    def test_fold_cv_calibrates_folds_as_users_do(self):
        # --fold-cv: each fold's calibration runs colocd calibrate's own
        # cross-validation (no --no-cv), as colocd calibrate does by default.
        doc = accuracy.load_doc(self.meas)
        seen = []
        real = accuracy.calibrate

        def spy(colocd, meas_path, out_path, requests, seed, cv, *rest):
            seen.append((os.path.basename(out_path), cv))
            return real(colocd, meas_path, out_path, requests, seed, cv, *rest)

        accuracy.calibrate = spy
        try:
            res = accuracy.evaluate(doc, self.colocd, requests=200, seeds=1, fold_cv=True)
        finally:
            accuracy.calibrate = real
            shutil.rmtree(doc["_tmp"], ignore_errors=True)
        folds = [cv for name, cv in seen if name.startswith("fold")]
        self.assertEqual(len(folds), 2, seen)
        self.assertTrue(all(folds), seen)
        self.assertTrue(res["fold_cv"])

    def test_accuracy_cli(self):
        js = os.path.join(self.dir, "acc.json")
        p = testlib.run_py("accuracy.py", "-q", "--colocd", self.colocd, "--measurements", self.meas, "--requests",
                           "200", "--seeds", "1", "--by", "inference", "--json", js)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("leave-one-inference-out", p.stdout)
        with open(js) as f:
            res = json.load(f)
        self.assertEqual(len(res["records"]), 12)
        self.assertEqual(sorted(res["mape"]), ["mps", "timeslice"])

    def test_accuracy_no_fit(self):
        # A source too small to fold is predicted with colocd's own
        # calibration: the figures are colocd predict's with no
        # --calibration, and nothing is calibrated.
        d = accuracy.load_doc(self.meas)
        real = accuracy.calibrate
        accuracy.calibrate = lambda *a, **k: self.fail("--no-fit calibrated")
        try:
            res = accuracy.evaluate(d, self.colocd, requests=200, seeds=1, no_fit=True)
        finally:
            accuracy.calibrate = real
            shutil.rmtree(d["_tmp"], ignore_errors=True)
        self.assertTrue(res["no_fit"])
        self.assertEqual(len(res["records"]), len(d["records"]))
        r, row = d["records"][0], res["records"][0]
        own = accuracy.predict(self.colocd, r, None, 200, 1, 0)
        p99 = [m for m in row["metrics"] if m["field"] == "latency_ms.p99"][0]
        self.assertEqual(p99["predicted"], own["inference"]["latency_ms"]["p99"])
        self.assertIn("no fit", accuracy.report(res))
        p = testlib.run_py("accuracy.py", "-q", "--colocd", self.colocd, "--measurements", self.meas, "--no-fit",
                           "--check")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--no-fit fits nothing", p.stderr)

    def test_accuracy_single_workload_mode(self):
        # A mode measured with one trainer only cannot be predicted for it:
        # said, not faked.
        with open(self.meas) as f:
            doc = json.load(f)
        doc["records"] = [r for r in doc["records"]
                          if r["mode"] == "timeslice" or "syn-train-x" in r["training"][0]]
        path = os.path.join(self.dir, "one-mps-trainer.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        d = accuracy.load_doc(path)
        try:
            res = accuracy.evaluate(d, self.colocd, requests=200, seeds=1)
        finally:
            shutil.rmtree(d["_tmp"], ignore_errors=True)
        mps = [r for r in res["records"] if r["mode"] == "mps"]
        self.assertTrue(mps and all(r.get("error", "").startswith("no mps record left") for r in mps))
        self.assertEqual(res["mape"]["mps"]["predicted"], 0)
        self.assertIsNone(res["mape"]["mps"]["all"]["mape"])
        self.assertIn("not predicted", accuracy.report(res))


if __name__ == "__main__":
    unittest.main()
