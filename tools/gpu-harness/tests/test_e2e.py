"""e2e_util.py: the dry run's assertions (a broken step fails it), the
SLOs chosen from the sidecar's quotes, and the results files. The dry run
itself is `make harness-e2e`."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import testlib
import e2e_util

UTIL = os.path.join(testlib.HARNESS, "e2e_util.py")


def run(*args):
    return subprocess.run([sys.executable, UTIL] + list(args), capture_output=True, text=True, timeout=30)


class Check(unittest.TestCase):
    def setUp(self):
        self.res = tempfile.mkdtemp(prefix="e2e-test-")
        quiet = contextlib.redirect_stderr(io.StringIO())  # record's progress lines
        quiet.__enter__()
        self.addCleanup(quiet.__exit__, None, None, None)

    def tearDown(self):
        shutil.rmtree(self.res, ignore_errors=True)

    def record_all(self, override=None):
        """Record every step as a dry run must give it, but for override
        {name: (status, reason, figures)}."""
        override = override or {}
        for name, _, want in e2e_util.STEPS:
            status, reason, figs = {"pass": ("pass", "ok", ["x=1"]),
                                    "skip": ("skip", "not measurable on fakes: why", ["x=2"])}[want]
            status, reason, figs = override.get(name, (status, reason, figs))
            e2e_util.cmd_record([self.res, name, status, "--reason", reason] + figs)

    def check_fails(self, override, want):
        """Into an empty results directory, record every step but for
        override (as record_all): check must fail, saying want."""
        shutil.rmtree(self.res)
        os.mkdir(self.res)
        self.record_all(override)
        p = run("check", self.res)
        self.assertEqual(p.returncode, 1)
        self.assertIn(want, p.stderr)

    def test_every_step_as_expected_passes(self):
        self.record_all()
        p = run("check", self.res)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")

    def test_a_failed_step_fails_the_dry_run(self):
        self.check_fails({"throttle_reload": ("fail", "no restart", ["pct=50"])},
                         "DRY RUN FAILED: throttle_reload: fail (no restart)")

    def test_a_pass_step_skipped_fails(self):
        self.check_fails({"revoke_evict": ("skip", "not measurable on fakes: guessed", [])},
                         "DRY RUN FAILED: revoke_evict: skip")

    def test_a_skip_without_its_reason_or_figures_fails(self):
        for reason, figs in (("later", ["x=2"]), ("not measurable on fakes: why", [])):
            with self.subTest(reason=reason, figs=figs):
                self.check_fails({"fault_containment": ("skip", reason, figs)},
                                 "fault_containment: want a skip 'not measurable on fakes'")

    def test_a_skip_that_passes_on_fakes_fails(self):
        self.check_fails({"other_uid_register": ("pass", "refused", ["uid=65534"])},
                         "other_uid_register: passes on fakes now")

    def test_a_skip_for_the_machine_is_allowed_where_listed(self):
        self.record_all({"other_uid_register": ("skip", "not root: this run cannot start a process of another user", [])})
        p = run("check", self.res)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("skipped on this machine: other_uid_register", p.stderr)
        self.check_fails({"revoke_evict": ("skip", "not root: no", [])}, "DRY RUN FAILED: revoke_evict: skip (not root: no)")

    def test_a_missing_or_repeated_step_fails(self):
        self.record_all()
        with open(os.path.join(self.res, "steps.jsonl")) as f:
            lines = f.readlines()
        with open(os.path.join(self.res, "steps.jsonl"), "w") as f:
            f.writelines([l for l in lines if '"name": "shutdown"' not in l] + [lines[0]])
        p = run("check", self.res)
        self.assertEqual(p.returncode, 1)
        self.assertIn("shutdown: not recorded", p.stderr)
        self.assertIn("device: recorded 2 times", p.stderr)

    def test_record_refuses_an_unknown_status(self):
        p = run("record", self.res, "device", "ok")
        self.assertNotEqual(p.returncode, 0)

    def test_report_marks_steps_not_run(self):
        run("record", self.res, "device", "pass", "name=\"NVIDIA H100 80GB HBM3\"", "memory_total_mib=81559")
        with open(os.path.join(self.res, "meta.json"), "w") as f:
            json.dump({"backend": "gpu", "device": {"name": "NVIDIA H100 80GB HBM3", "kind": "H100"},
                       "started": "2026-12-07T00:00:00Z", "wall_s": 12, "exit": 1}, f)
        out = tempfile.mkdtemp(prefix="e2e-out-")
        self.addCleanup(shutil.rmtree, out, True)
        self.assertEqual(run("report", self.res, out).returncode, 0)
        with open(os.path.join(out, "results.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["format"], "colocd.e2e/v1")
        self.assertEqual([s["name"] for s in doc["steps"]], [n for n, _, _ in e2e_util.STEPS])
        self.assertEqual(doc["steps"][0]["figures"], {"name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559})
        self.assertEqual(doc["counts"], {"pass": 1, "fail": len(e2e_util.STEPS) - 1, "skip": 0})
        self.assertTrue(all("not run" in s["reason"] for s in doc["steps"][1:]))
        self.assertTrue(doc["steps"][[n for n, _, _ in e2e_util.STEPS].index("fault_containment")]["gpu_only"])
        with open(os.path.join(out, "results.md")) as f:
            md = f.read()
        self.assertIn("# colocd end to end: on NVIDIA H100 80GB HBM3", md)
        self.assertIn("| device | pass |", md)


class SLOs(unittest.TestCase):
    def test_slos_grant_throttle_and_revoke(self):
        def quote(p99):
            return [{"decision": "grant", "predictions": [{"solo_p99_ms": 14.0, "predicted_p99_ms": p99}]}]
        d = tempfile.mkdtemp(prefix="e2e-slo-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "quotes.json")
        with open(path, "w") as f:
            json.dump({"10": quote(14.6), "20": quote(15.6), "50": quote(17.9), "100": quote(21.8)}, f)
        p = run("slos", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = json.loads(p.stdout)
        limit = {k: got[k] * 0.9 for k in ("grant", "throttle", "revoke")}
        self.assertGreater(limit["grant"], 21.8)                 # 100 % fits
        self.assertTrue(15.6 < limit["throttle"] < 17.9)         # 20 % fits, 50 % does not
        self.assertTrue(14.0 < limit["revoke"] < 14.6)           # solo fits, 10 % does not


if __name__ == "__main__":
    unittest.main()
