"""The MPS daemon wrapper against fake_mps_control.py: start with our own
pipe and log directories, query, quit; a daemon that cannot start is
recorded with what it said."""

import os
import shutil
import tempfile
import unittest

import testlib
import mpsctl

FAKE = os.path.join(testlib.HARNESS, "fake_mps_control.py")


class Daemon(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.pipe = os.path.join(self.d, "pipe")
        self.log = os.path.join(self.d, "log")

    def tearDown(self):
        shutil.rmtree(self.d, ignore_errors=True)

    def test_start_attach_quit(self):
        env = {"PATH": os.environ.get("PATH", ""), "CUDA_MPS_PIPE_DIRECTORY": "/tmp/nvidia-mps"}
        d = mpsctl.Daemon(FAKE, self.pipe, self.log, base_env=env)
        # Its own directories, never the system default.
        self.assertEqual(d.env["CUDA_MPS_PIPE_DIRECTORY"], self.pipe)
        self.assertEqual(d.env["CUDA_MPS_LOG_DIRECTORY"], self.log)
        r = d.start()
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["argv"], [FAKE, "-d"])
        self.assertTrue(os.path.exists(d.pid_file()))
        self.assertEqual(d.client_env(50)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50")
        # No client yet: not attached.
        ok, ev, _ = d.attachment([1234])
        self.assertFalse(ok)
        with open(os.path.join(self.pipe, "fake-clients"), "w") as f:
            f.write("1234\n1235\n")
        ok, ev, rows = d.attachment([1234, 1235])
        self.assertTrue(ok, ev)
        self.assertEqual([r["pid"] for r in rows], [1234, 1235])
        self.assertEqual(ev["servers"], [4242])
        res = d.terminate_client(1234)
        self.assertEqual(res[0]["stdin"], "terminate_client 4242 1234\n")
        # A second daemon on the same pipe directory is refused.
        self.assertFalse(mpsctl.Daemon(FAKE, self.pipe, self.log, base_env=env).start()["ok"])
        q = d.quit()
        self.assertTrue(q["ok"], q)
        self.assertEqual(q["stdin"], "quit\n")
        self.assertFalse(os.path.exists(d.pid_file()))
        self.assertIn("Exit", d.log_tail())

    def test_start_failure_is_recorded(self):
        env = dict(os.environ, FAKE_MPS_FAIL="mps: cannot open /dev/shm (simulated)")
        d = mpsctl.Daemon(FAKE, self.pipe, self.log, base_env=env)
        r = d.start()
        self.assertFalse(r["ok"])
        self.assertEqual(r["rc"], 1)
        self.assertIn("cannot open /dev/shm", r["stderr"])

    def test_missing_binary(self):
        d = mpsctl.Daemon(os.path.join(self.d, "no-such-control"), self.pipe, self.log, base_env={})
        r = d.start()
        self.assertFalse(r["ok"])
        self.assertIsNone(r["rc"])
        self.assertIn("FileNotFoundError", r["stderr"])


if __name__ == "__main__":
    unittest.main()
