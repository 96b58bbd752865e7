"""measure.py end to end with the fake backend and the fake MPS daemon (no
GPU): the orchestration, the output files, MPS start/attach/quit and its
failure path, the deadline, and colocd reading what the harness wrote."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

import testlib
import core

FAKE_MPS = os.path.join(testlib.HARNESS, "fake_mps_control.py")


def fake_run(out, *extra, env=None, colocd=None):
    args = ["--out", out, "--mps-control", FAKE_MPS] + testlib.FAKE_RUN_ARGS + list(extra)
    args += ["--colocd", colocd or os.path.join(out, "no-colocd-here")]
    p = testlib.run_py("measure.py", *args, env=env or {}, timeout=120)
    with open(os.path.join(out, "run.json")) as f:
        return p, json.load(f)


def finalize_copy(test, *remove):
    """A copy of test.out without `remove`, rebuilt by measure.py
    --finalize-only (which needs colocd: the test skips without it)."""
    if not test.colocd:
        test.skipTest("no go to build colocd")
    out2 = os.path.join(test.dir, "copy")
    shutil.copytree(test.out, out2)
    for r in remove:
        path = os.path.join(out2, r)
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    p = testlib.run_py("measure.py", "--out", out2, "--finalize-only", "--colocd", test.colocd)
    test.assertEqual(p.returncode, 0, p.stderr)
    return out2


class FakeRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.colocd = testlib.colocd_binary()
        cls.dir = tempfile.mkdtemp(prefix="harness-fake-run-")
        cls.out = os.path.join(cls.dir, "out")
        cls.pipe = os.path.join(cls.dir, "pipe")
        cls.proc, cls.state = fake_run(cls.out, "--mps-pipe-dir", cls.pipe, colocd=cls.colocd)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_exit_and_files(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        for f in ("run.json", "raw.jsonl", "summary.txt", "logs/ts-inference.log", "logs/mps-training-50.log",
                  "traces/resnet50-infer.json.gz",
                  "traces/gpt2-train.json.gz", "mps-log/control.log"):
            self.assertTrue(os.path.exists(os.path.join(self.out, f)), f)
        self.assertEqual(self.state["errors"], [])
        self.assertEqual(self.state["backend"], "fake")

    def test_windows(self):
        ws = self.state["windows"]
        # 2 inference x 2 training x (1 time-slicing load + 2 MPS percentages)
        self.assertEqual(len(ws), 12)
        self.assertEqual(sum(1 for w in ws if w["mode"] == "timeslice"), 4)
        self.assertEqual(sorted(set(w["pct"] for w in ws if w["mode"] == "mps")), [50, 100])
        for w in ws:
            self.assertGreaterEqual(w["requests"], 20)
            self.assertLessEqual(w["requests"], 30)
            for k in core.PERCENTILE_KEYS:
                self.assertGreater(w["latency_ms"][k], 0)
                self.assertGreaterEqual(w["latency_ms"]["p99"], w["latency_ms"]["p50"])
            self.assertGreaterEqual(w["latency_ms"]["mean"], w["service_ms"]["mean"] - 1e-9)
            self.assertGreater(w["training_iterations"], 0)
            self.assertGreater(w["training_iteration_ms"], 0)
        # The fake trainer at 50 % runs slower than at 100 %.
        it = {w["pct"]: w["training_iteration_ms"] for w in ws if w["mode"] == "mps" and w["training"] == "bert-train"}
        self.assertGreater(it[50], it[100])
        with open(os.path.join(self.out, "raw.jsonl")) as f:
            raw = [json.loads(l) for l in f]
        self.assertEqual(sum(1 for r in raw if "@" in r["tag"]), 12)

    def test_solo(self):
        s = self.state["solo"]
        for n in ("resnet50-infer", "gpt-decode"):
            self.assertIn("mean", s[n]["service_backtoback_ms"])
            self.assertIn("0.30", s[n]["rates"])
            self.assertIn("latency_ms", s[n]["at_load"]["0.30"])
        for n in ("bert-train", "gpt2-train"):
            self.assertGreater(s[n]["iteration_ms"]["mean"], 0)
        self.assertIn("bert-train@50", self.state["mps_solo"])

    def test_mps_lifecycle(self):
        m = self.state["mps"]
        self.assertEqual(m["status"], "done")
        self.assertTrue(m["start"]["ok"])
        self.assertEqual(m["pipe_dir"], os.path.abspath(self.pipe))
        self.assertEqual(m["start"]["env"]["CUDA_MPS_PIPE_DIRECTORY"], os.path.abspath(self.pipe))
        self.assertEqual(m["attachment"]["missing"], [])
        self.assertTrue(m["quit"]["ok"], m["quit"])
        self.assertFalse(os.path.exists(os.path.join(self.pipe, core.MPS_PID_FILE)))
        closed = self.state["closed_workers"]
        self.assertEqual(len(closed), 5)
        self.assertTrue(all(c["rc"] == 0 and not c.get("killed") for c in closed), closed)

    def test_measurements(self):
        if not self.colocd:
            self.skipTest("no go to build colocd")
        for n, p in self.state["profiles"].items():
            self.assertTrue(p["ok"], (n, p))
        with open(os.path.join(self.out, "measurements.json")) as f:
            doc = json.load(f)
        self.assertEqual(core.check_measurements(doc), [])
        self.assertEqual(len(doc["records"]), 12)
        self.assertTrue(doc["source"].startswith("SYNTHETIC"))
        self.assertEqual(doc["device"]["sms"], 132)
        prof = [os.path.join(self.out, "profiles", f) for f in sorted(os.listdir(os.path.join(self.out, "profiles")))]
        v = subprocess.run([self.colocd, "profile", "validate"] + prof, capture_output=True, text=True)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertEqual(v.stdout.count("ok "), 4)
        with open(os.path.join(self.out, "profiles", "resnet50-infer.json")) as f:
            p = json.load(f)
        self.assertEqual(p["kind"], "inference")
        self.assertEqual(p["source"]["unit"], "annotation request")
        with open(os.path.join(self.out, "profiles", "gpt2-train.json")) as f:
            self.assertTrue(json.load(f)["source"]["unit"].startswith("ProfilerStep#"))
        cal = os.path.join(self.dir, "cal.json")
        c = subprocess.run([self.colocd, "calibrate", "--measurements", os.path.join(self.out, "measurements.json"),
                            "--out", cal, "--no-cv", "--requests", "100", "--json"], capture_output=True, text=True)
        self.assertEqual(c.returncode, 0, c.stderr)
        got = json.loads(c.stdout)
        self.assertIn("timeslice", got)
        self.assertIn("mps", got)
        self.assertEqual(got["fit"]["records"], 4)
        self.assertEqual(got["mps"]["fit"]["records"], 8)

    def test_finalize_only(self):
        out2 = finalize_copy(self, "profiles", "measurements.json")
        with open(os.path.join(out2, "measurements.json")) as f:
            self.assertEqual(len(json.load(f)["records"]), 12)


class FakeRunOptIn(unittest.TestCase):
    """The opt-in phases of issue #51 end to end on the fakes: time slicing
    traced from both sides, and the MPS spin sweep."""

    @classmethod
    def setUpClass(cls):
        cls.colocd = testlib.colocd_binary()
        cls.dir = tempfile.mkdtemp(prefix="harness-fake-optin-")
        cls.out = os.path.join(cls.dir, "out")
        cls.proc, cls.state = fake_run(cls.out, "--inference", "resnet50-infer,gpt-decode", "--training", "bert-train",
                                       "--mps-pcts", "100", "--ts-traces", "--spin-sweep", "--spin-inference",
                                       "gpt-decode", "--spin-requests", "20", "--trace-window-s", "0.4",
                                       "--mps-pipe-dir", os.path.join(cls.dir, "pipe"), colocd=cls.colocd)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_exit(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        self.assertEqual(self.state["errors"], [])
        self.assertEqual(self.state["skipped"], [])
        phases = [p["phase"] for p in self.state["phases"]]
        self.assertLess(phases.index("time slicing traced from both sides"), phases.index("MPS"))
        self.assertIn("MPS spin sweep", phases)

    def test_traced_pairs(self):
        pairs = self.state["trace_pairs"]
        self.assertEqual([p["name"] for p in pairs], ["resnet50-infer+bert-train@ts-traced,load=0.30",
                                                      "gpt-decode+bert-train@ts-traced,load=0.30"])
        for p in pairs:
            for role in ("inference", "training"):
                self.assertTrue(os.path.exists(os.path.join(self.out, p["traces"][role])))
                # The fake trace clock is skewed from CLOCK_REALTIME: only the
                # marks align it.
                self.assertEqual(p["clock"][role]["method"], "marks")
            sh = p["shares"]
            self.assertEqual(sh["window_ms"], 400.0)
            self.assertGreater(sh["both_pending_ms"], 0)
            self.assertAlmostEqual(sh["inference"]["share"] + sh["training"]["share"], 1.0, places=3)
            for role in ("inference", "training"):
                self.assertLessEqual(sh[role]["share_min"], sh[role]["share"])
                self.assertLessEqual(sh[role]["share"], sh[role]["share_max"])
            self.assertGreater(p["requests"], 0)
            self.assertGreater(p["training_iterations"], 0)
        with open(os.path.join(self.out, "timeslice_shares.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["format"], core.SHARES_FORMAT)
        self.assertTrue(doc["source"].startswith("SYNTHETIC"))
        self.assertEqual(len(doc["records"]), 2)
        with open(os.path.join(self.out, "summary.txt")) as f:
            self.assertIn("time slicing traced from both sides", f.read())

    def test_spin_sweep(self):
        sw = self.state["spin_sweep"]
        self.assertEqual(sw["status"], "done")
        self.assertEqual((sw["inference"], sw["pct"]), ("gpt-decode", 100))
        spins = ["spin-long-train", "spin-short-train", "spin-mem-low-train", "spin-mem-high-train"]
        self.assertEqual([w["training"] for w in sw["windows"]], spins)
        self.assertEqual(sw["trainers"]["spin-mem-high-train"]["mem_bytes_per_block"], 524288)
        self.assertEqual(sw["trainers"]["spin-mem-high-train"]["block_us"],
                         sw["trainers"]["spin-short-train"]["block_us"])
        # Every window on the same arrivals as the service alone.
        self.assertEqual(set(w["seed"] for w in sw["windows"]), {sw["solo"]["seed"]})
        for w in sw["windows"]:
            self.assertEqual(w["requests"], 20)
            self.assertGreater(w["latency_slowdown"]["mean"], 0)
            self.assertGreater(w["service_slowdown"]["p99"], 0)
            self.assertGreater(w["training_slowdown"], 0)
        # Their windows are not the MPS records' windows.
        self.assertEqual(sorted(w["training"] for w in self.state["windows"]), ["bert-train"] * 4)
        with open(os.path.join(self.out, "mps_spin_sweep.json")) as f:
            self.assertEqual(json.load(f)["format"], core.SPIN_SWEEP_FORMAT)

    def test_sweep_windows_are_records(self):
        if not self.colocd:
            self.skipTest("no go to build colocd")
        with open(os.path.join(self.out, "measurements.json")) as f:
            doc = json.load(f)
        self.assertEqual(core.check_measurements(doc), [])
        names = [r["name"] for r in doc["records"]]
        self.assertIn("gpt-decode+spin-mem-high-train@mps100,load=0.07", names)
        self.assertEqual(len(names), 8)

    def test_finalize_only_reanalyzes(self):
        out2 = finalize_copy(self, "timeslice_shares.json")
        with open(os.path.join(out2, "timeslice_shares.json")) as f:
            doc = json.load(f)
        self.assertEqual([r["shares"] for r in doc["records"]], [t["shares"] for t in self.state["trace_pairs"]])

    def test_spin_inference_must_be_served(self):
        p = testlib.run_py("measure.py", "--out", "unused", "--plan", "--spin-sweep", "--inference", "gpt-decode")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--spin-inference bert-infer", p.stderr)


class FakeRunFailures(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="harness-fake-fail-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_mps_cannot_start(self):
        out = os.path.join(self.dir, "out")
        p, run = fake_run(out, "--inference", "gpt-decode", "--training", "bert-train",
                          env={"FAKE_MPS_FAIL": "nvidia-cuda-mps-control: simulated failure to start"})
        self.assertEqual(p.returncode, 0, p.stderr)
        m = run["mps"]
        self.assertEqual(m["status"], "failed to start")
        self.assertIn("simulated failure to start", m["start"]["stderr"])
        self.assertEqual(m["start"]["rc"], 1)
        # Time-slicing data is still there.
        self.assertEqual([w["mode"] for w in run["windows"]], ["timeslice"])
        with open(os.path.join(out, "summary.txt")) as f:
            self.assertIn("failed to start", f.read())

    def test_clients_not_attached(self):
        # A control binary that starts but whose clients never attach: the
        # check keeps a plain run from posing as MPS.
        ctl = os.path.join(self.dir, "ctl")
        with open(ctl, "w") as f:
            f.write("#!/bin/sh\n[ \"$1\" = -d ] && touch \"$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid\"\n"
                    "cat >/dev/null\nexit 0\n")
        os.chmod(ctl, 0o755)
        out = os.path.join(self.dir, "out")
        args = ["--out", out, "--mps-control", ctl, "--colocd", "none"] + testlib.FAKE_RUN_ARGS
        args += ["--inference", "gpt-decode", "--training", "bert-train", "--mps-pipe-dir", os.path.join(self.dir, "p")]
        p = testlib.run_py("measure.py", *args, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "run.json")) as f:
            run = json.load(f)
        self.assertEqual(run["mps"]["status"], "clients not attached")
        # control.log names the clients, but no server exists: not MPS.
        self.assertEqual(run["mps"]["attachment"]["servers"], [])
        self.assertIn("quit", run["mps"])
        self.assertTrue(all(w["mode"] == "timeslice" for w in run["windows"]))

    def test_trainer_failure_invalidates_windows(self):
        out = os.path.join(self.dir, "out")
        # The trainers fail after their solo and warm-up iterations, during
        # the first window of each group.
        p, run = fake_run(out, "--inference", "gpt-decode", "--training", "bert-train", "--mps-pcts", "100",
                          env={"FAKE_TRAIN_FAIL_AFTER": "12"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(run["windows"], [])
        self.assertTrue(run["invalid_windows"])
        self.assertTrue(any("fake trainer failure" in e["error"] for e in run["errors"]), run["errors"])
        self.assertTrue(run["mps"]["quit"]["ok"])
        self.assertFalse(os.path.exists(os.path.join(out, "measurements.json")))

    def test_deadline_stops_early_and_writes(self):
        out = os.path.join(self.dir, "out")
        p, run = fake_run(out, "--budget-s", "3", "--min-window-s", "1", "--max-requests", "300",
                          "--min-requests", "200")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(run["elapsed_s"], 15)
        self.assertTrue(run["skipped"])
        self.assertTrue(any(s["why"].startswith("deadline") for s in run["skipped"]) or
                        run["mps"].get("why", "").startswith("deadline"))
        self.assertTrue(os.path.exists(os.path.join(out, "summary.txt")))


class Plan(unittest.TestCase):
    def test_plan_prints_budget(self):
        p = testlib.run_py("measure.py", "--out", "unused", "--plan")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("45 co-located windows in 12 groups", p.stdout)
        total = [l for l in p.stdout.splitlines() if l.startswith("total")][0]
        self.assertLessEqual(float(total.split()[1]), 300.0)

    def test_unknown_workload(self):
        p = testlib.run_py("measure.py", "--out", "unused", "--plan", "--inference", "nope")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("unknown workloads", p.stderr)


if __name__ == "__main__":
    unittest.main()
