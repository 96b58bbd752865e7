"""The scripts parse, and run.sh packs a dry run (fake backend) into at most
8 files, as a remote runner returns them."""

import glob
import os
import py_compile
import shutil
import subprocess
import tarfile
import tempfile
import unittest

import testlib


class Scripts(unittest.TestCase):
    def test_python_compiles(self):
        files = glob.glob(os.path.join(testlib.HARNESS, "*.py")) + glob.glob(os.path.join(testlib.TESTS, "*.py"))
        self.assertGreaterEqual(len(files), 10)
        d = tempfile.mkdtemp()
        try:
            for f in files:
                py_compile.compile(f, cfile=os.path.join(d, os.path.basename(f) + "c"), doraise=True)
        finally:
            shutil.rmtree(d)

    def test_shell_parses(self):
        for f in glob.glob(os.path.join(testlib.HARNESS, "*.sh")):
            p = subprocess.run(["bash", "-n", f], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)

    def test_executable(self):
        for f in ("run.sh", "measure.py", "accuracy.py", "synth.py", "worker.py", "fake_mps_control.py"):
            self.assertTrue(os.access(os.path.join(testlib.HARNESS, f), os.X_OK), f)

    def test_run_sh_dry_run(self):
        out = tempfile.mkdtemp(prefix="harness-runsh-")
        self.addCleanup(shutil.rmtree, out, True)
        colocd = testlib.colocd_binary() or "/nonexistent/colocd"
        env = dict(os.environ, OUT=out, BACKEND="fake", BUDGET_S="40", COLOCD=colocd, NAME="dry")
        args = ["--inference", "gpt-decode", "--training", "bert-train", "--timeslice-loads", "0.3",
                "--mps-pcts", "100", "--min-requests", "20", "--max-requests", "30", "--solo-requests", "20",
                "--solo-backtoback", "10", "--solo-train-iters", "4"]
        p = subprocess.run(["bash", os.path.join(testlib.HARNESS, "run.sh")] + args, env=env, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        files = sorted(os.listdir(out))
        self.assertLessEqual(len(files), 8)
        for f in ("run.log", "summary.txt", "dry-results.tar.gz", "dry-traces.tar"):
            self.assertIn(f, files)
        if testlib.colocd_binary():
            self.assertIn("measurements.json", files)
        with tarfile.open(os.path.join(out, "dry-results.tar.gz")) as t:
            names = t.getnames()
        self.assertIn("dry/run.json", names)
        self.assertFalse(any(n.startswith("dry/traces/") for n in names))
        with open(os.path.join(out, "run.log")) as f:
            log = f.read()
        self.assertIn("BACKEND=fake", log)
        self.assertIn("run.sh exit status 0", log)


if __name__ == "__main__":
    unittest.main()
