"""tools/public/orion.py: the committed public files are what the converter
makes of the artifact's raw files, and bad input is named, not guessed."""

import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
DATA = os.path.join(REPO, "testdata", "public", "orion-v100")
sys.path.insert(0, os.path.dirname(HERE))

import orion  # noqa: E402


class Committed(unittest.TestCase):
    def test_committed_files_are_fresh(self):
        self.assertEqual(orion.main(["--data", DATA, "--check"]), 0)

    def test_mapping(self):
        files = orion.convert(DATA)
        infer = json.loads(files["profiles/resnet50-infer-b4.json"])
        self.assertEqual(infer["kind"], "inference")
        self.assertEqual(infer["device"]["sms"], 80)
        # The first row: Conv, SM_usage 98, 100480 ns: every SM, 1.225 waves.
        first = infer["ops"][0]
        self.assertEqual((first["dur_us"], first["sm"], first["waves"]), (100.48, 1.0, 1.225))
        self.assertNotIn("occupancy", first)
        self.assertAlmostEqual(sum(o["dur_us"] for o in infer["ops"]), 6498.424, places=3)
        train = json.loads(files["profiles/resnet50-train-b32.json"])
        self.assertEqual(len(train["ops"]), 946)
        # SM_usage 2: two of 80 SMs, one (partial) wave.
        self.assertEqual((train["ops"][0]["sm"], train["ops"][0]["waves"]), (0.025, 1.0))
        rec = json.loads(files["measurements.json"])["records"][0]
        self.assertEqual((rec["mode"], rec["training_pct"], rec["rate_rps"]), ("mps", 100, 30.0))
        self.assertEqual(rec["measured"]["latency_ms"]["p99"], 181.0124)
        # 27 timed iterations (38 run, 10 warm-up, Orion's count) in 2.9276 s.
        self.assertAlmostEqual(rec["measured"]["training_iteration_ms"], 108.4304, places=4)


class BadInput(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="orion-test-")
        shutil.copytree(os.path.join(DATA, "raw"), os.path.join(self.dir, "raw"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, text):
        with open(os.path.join(self.dir, "raw", name), "w") as f:
            f.write(text)

    def fails(self, want):
        with self.assertRaises(orion.ConvertError) as cm:
            orion.convert(self.dir)
        self.assertIn(want, str(cm.exception))

    def test_header(self):
        self.write("resnet50_4_fwd", "Name,SM,Duration\nConv,1,2\n")
        self.fails("header")

    def test_sm_usage(self):
        self.write("resnet50_4_fwd", "Name,Profile,Memory_footprint,SM_usage,Duration\nConv,1,0,lots,100\n")
        self.fails("line 2: SM_usage 'lots' is not an integer")

    def test_duration(self):
        self.write("resnet50_4_fwd", "Name,Profile,Memory_footprint,SM_usage,Duration\nConv,1,0,8,-5\n")
        self.fails("line 2: Duration '-5' ns")

    def test_fields(self):
        self.write("resnet50_32_fb1", "Name,Profile,Memory_footprint,SM_usage,Duration\nConv,1,0\n")
        self.fails("line 2: 3 fields, want 5")

    def test_empty(self):
        self.write("resnet50_32_fb1", "Name,Profile,Memory_footprint,SM_usage,Duration\n")
        self.fails("no kernels")

    def test_log(self):
        self.write(orion.LOG, json.dumps({"p50-latency-0": 1, "p90-latency-0": 2, "p95-latency-0": 3,
                                          "p99-latency-0": "slow"}))
        self.fails("p99-latency-0 is 'slow', want a finite number > 0")

    def test_log_not_finite(self):
        with open(os.path.join(DATA, "raw", orion.LOG)) as f:
            log = json.load(f)
        log["p99-latency-0"] = float("inf")
        self.write(orion.LOG, json.dumps(log))
        self.fails("p99-latency-0 is inf, want a finite number > 0")
        log["p99-latency-0"], log["iterations-1"] = 181.0, 37.5
        self.write(orion.LOG, json.dumps(log))
        self.fails("iterations-1 is 37.5, want a whole number")

    def test_check_sees_stale_files(self):
        self.assertEqual(orion.main(["--data", self.dir]), 0)
        self.assertEqual(orion.main(["--data", self.dir, "--check"]), 0)
        self.write("resnet50_4_fwd", "Name,Profile,Memory_footprint,SM_usage,Duration\nConv,1,0,8,100\n")
        self.assertEqual(orion.main(["--data", self.dir, "--check"]), 1)



class Fuzz(unittest.TestCase):
    """Mutated kernel files either convert to well-formed ops or fail with
    ConvertError; nothing else escapes."""

    def test_mutations(self):
        import random
        rng = random.Random(36)
        with open(os.path.join(DATA, "raw", "resnet50_4_fwd")) as f:
            base = f.read()
        alphabet = "0123456789,.-e\n\"x \t\r"
        for _ in range(3000):
            text = list(base[: rng.randint(0, 400)])
            for _ in range(rng.randint(1, 8)):
                op, i = rng.random(), rng.randint(0, max(0, len(text) - 1))
                if op < 0.4 and text:
                    text[i] = rng.choice(alphabet)
                elif op < 0.7:
                    text.insert(i, rng.choice(alphabet))
                elif text:
                    del text[i]
            try:
                kernels = orion.read_kernels("".join(text), "fuzz")
            except orion.ConvertError:
                continue
            prof = orion.profile(kernels, "fuzz", "inference")
            for o in prof["ops"]:
                self.assertTrue(0 <= o["dur_us"] <= 3.6e9, o)
                self.assertTrue(0 < o["sm"] <= 1, o)
                self.assertTrue(1 <= o["waves"] <= 1e9, o)
            self.assertGreater(sum(o["dur_us"] for o in prof["ops"]), 0)


if __name__ == "__main__":
    unittest.main()
