"""The worker process and its protocol, with the fake backend: the same
serve/solo/train loops the torch backend runs on the GPU."""

import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest

import testlib
import core
import fake
import worker


class WorkerProcess(unittest.TestCase):
    def spawn(self, role, env=None):
        argv = [sys.executable, os.path.join(testlib.HARNESS, "worker.py"), "--backend", "fake", "--role", role]
        e = dict(os.environ)
        e.update(env or {})
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        self.addCleanup(self._close, p)
        return p, core.LineReader(p.stdout.fileno())

    def _close(self, p):
        if p.poll() is None:
            p.kill()
        p.wait()
        for f in (p.stdin, p.stdout, p.stderr):
            f.close()

    def call(self, p, r, msg, timeout=20):
        p.stdin.write(core.encode(msg))
        p.stdin.flush()
        line = r.readline(timeout)
        self.assertIsNotNone(line, "no reply to %s" % msg)
        return core.decode(line)

    def test_inference(self):
        p, r = self.spawn("inference")
        rep = self.call(p, r, {"cmd": "init", "workloads": ["gpt-decode"]})
        self.assertTrue(rep["ok"], rep)
        self.assertEqual(rep["pid"], p.pid)
        self.assertEqual(rep["env"]["backend"], "fake")
        rep = self.call(p, r, {"cmd": "solo", "workload": "gpt-decode", "n": 5})
        self.assertEqual(len(rep["ms"]), 5)
        self.assertTrue(all(x > 1.0 for x in rep["ms"]))
        offs = core.poisson_offsets(400.0, 30, 2)
        rep = self.call(p, r, {"cmd": "serve", "workload": "gpt-decode", "offsets": offs, "lead_s": 0.01})
        self.assertTrue(rep["ok"], rep)
        a, s, e = rep["arrivals"], rep["starts"], rep["ends"]
        self.assertEqual(len(a), 30)
        prev = 0
        for i in range(30):
            self.assertAlmostEqual(a[i], offs[i] * 1e9, delta=1)
            # FIFO: a request starts at max(arrival, previous completion).
            self.assertGreaterEqual(s[i], a[i])
            self.assertGreaterEqual(s[i], prev)
            self.assertGreater(e[i], s[i])
            prev = e[i]
        lat, svc = core.request_times(a, s, e)
        self.assertTrue(all(l >= v for l, v in zip(lat, svc)))
        rep = self.call(p, r, {"cmd": "nope"})
        self.assertFalse(rep["ok"])
        self.assertIn("unknown command", rep["error"])
        rep = self.call(p, r, {"cmd": "quit"})
        self.assertTrue(rep["ok"])
        self.assertEqual(p.wait(10), 0)

    def test_train_until_stop(self):
        gpu = tempfile.mkdtemp()
        p, r = self.spawn("training", {"FAKE_GPU_DIR": gpu})
        self.assertTrue(self.call(p, r, {"cmd": "init", "workloads": ["bert-train"]})["ok"])
        ev = self.call(p, r, {"cmd": "train", "workload": "bert-train", "warm": 1, "max_s": 30})
        self.assertEqual(ev.get("event"), "running")
        # While it trains, the fake GPU shows a busy trainer.
        self.assertEqual(len([n for n in os.listdir(gpu) if n.startswith("trainer-")]), 1)
        line = r.readline(0.2)
        self.assertIsNone(line)
        rep = self.call(p, r, {"cmd": "stop"})
        self.assertTrue(rep["ok"], rep)
        self.assertEqual(rep["stopped"], "stop")
        self.assertGreaterEqual(len(rep["iters"]), 2)
        for (s0, e0), (s1, e1) in zip(rep["iters"], rep["iters"][1:]):
            self.assertLess(s0, e0)
            self.assertLessEqual(e0, s1)
        self.assertEqual([n for n in os.listdir(gpu) if n.startswith("trainer-")], [])

    def test_eof_ends_worker(self):
        p, r = self.spawn("training")
        self.assertTrue(self.call(p, r, {"cmd": "init", "workloads": ["bert-train"]})["ok"])
        ev = self.call(p, r, {"cmd": "train", "workload": "bert-train", "warm": 0, "max_s": 30})
        self.assertEqual(ev.get("event"), "running")
        p.stdin.close()
        self.assertEqual(p.wait(10), 0)

    def test_ignores_sigterm(self):
        import signal
        import time
        p, r = self.spawn("inference")
        self.assertTrue(self.call(p, r, {"cmd": "init", "workloads": ["gpt-decode"]})["ok"])
        p.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        self.assertIsNone(p.poll())
        self.assertTrue(self.call(p, r, {"cmd": "quit"})["ok"])


class Traces(unittest.TestCase):
    def test_gzip_wraps_a_bare_event_array(self):
        d = tempfile.mkdtemp()
        src, dst = os.path.join(d, "t.json"), os.path.join(d, "t.json.gz")
        with open(src, "w") as f:
            f.write("  [" + ",".join('{"name": "e%d", "ph": "X"}' % i for i in range(2000)) + "]")
        worker.gzip_trace(src, dst)
        with gzip.open(dst, "rt") as f:
            doc = json.load(f)
        self.assertEqual(len(doc["traceEvents"]), 2000)
        with open(src, "w") as f:
            json.dump({"traceEvents": [{"name": "x"}], "deviceProperties": []}, f)
        worker.gzip_trace(src, dst)
        with gzip.open(dst, "rt") as f:
            self.assertEqual(json.load(f)["traceEvents"], [{"name": "x"}])

    def test_fake_trace_layout(self):
        t = fake.fake_trace("bert-infer", 3)
        cats = {e["cat"] for e in t["traceEvents"]}
        self.assertEqual(cats, {"kernel", "cuda_runtime", "user_annotation"})
        self.assertEqual(sum(1 for e in t["traceEvents"] if e["name"] == "request"), 3)
        self.assertEqual(t["deviceProperties"][0]["numSms"], 132)
        k = [e for e in t["traceEvents"] if e["cat"] == "kernel"]
        launches = {e["args"]["correlation"] for e in t["traceEvents"] if e["cat"] == "cuda_runtime"}
        self.assertTrue(all(e["args"]["correlation"] in launches for e in k))


if __name__ == "__main__":
    unittest.main()
