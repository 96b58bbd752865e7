"""Time slicing seen from both sides: the share analysis on synthetic
Kineto traces written here (known kernels, known clocks, known shares),
read back through measure.analyze_pair as a run reads its two traces."""

import os
import shutil
import tempfile
import unittest

import testlib  # noqa: F401  (puts the harness on sys.path)
import core
import measure

T0 = 10000000000000  # the window's start, CLOCK_MONOTONIC ns
REALTIME = 1790000000000000123  # CLOCK_REALTIME - CLOCK_MONOTONIC, ns
BASE = 1790000000000000000  # a trace's baseTimeNanoseconds


def us(t):
    """T0 + t µs, in ns."""
    return T0 + int(round(t * 1000))


class Trace(object):
    """A Kineto-shaped trace whose clock is CLOCK_REALTIME + skew_ns after
    BASE, with the worker's two clock marks around the window."""

    def __init__(self, skew_ns=0, marks=True):
        self.skew, self.ev, self.corr = skew_ns, [], 0
        self.clock = {"marks": [], "t0_monotonic_ns": T0, "window_ns": us(1000) - T0}
        for name, at in zip(core.CLOCK_MARKS, (-300, 1100)):
            m = us(at)
            self.clock["marks"].append({"name": name, "monotonic_ns": [m - 500, m + 500],
                                        "realtime_ns": [m - 500 + REALTIME, m + 500 + REALTIME]})
            if marks:
                self.ev.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1,
                                "ts": self.ts(m), "dur": 1.0})
        self.ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": self.ts(T0), "dur": 5})

    def ts(self, mono_ns):
        return (mono_ns + REALTIME + self.skew - BASE) / 1e3

    def kernel(self, launch, start, end, cat="kernel"):
        """One kernel launched at `launch` running [start, end], µs after T0."""
        self.corr += 1
        self.ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                        "ts": self.ts(us(launch)), "dur": 4.0, "args": {"correlation": self.corr}})
        self.ev.append({"ph": "X", "cat": cat, "name": "k%d" % self.corr, "pid": 0, "tid": 7, "ts": self.ts(us(start)),
                        "dur": end - start, "args": {"correlation": self.corr, "stream": 7}})
        return self

    def doc(self):
        return {"schemaVersion": 1, "baseTimeNanoseconds": BASE, "traceEvents": list(self.ev)}


def two_requests():
    """The inference side: two requests, at 100 µs (one kernel) and at 600 µs
    (two kernels, the second queued behind the first)."""
    return Trace().kernel(100, 150, 250).kernel(600, 650, 700).kernel(610, 700, 800)


def trainer(skew_ns=0, marks=True):
    """The training side: always pending (everything launched before the
    window), its kernels leaving the GPU to the requests with a 10 µs gap."""
    return Trace(skew_ns, marks).kernel(-50, -50, 140).kernel(-50, 260, 640).kernel(-50, 810, 1200)


class Shares(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="harness-shares-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def analyze(self, inference, training):
        rec = {"traces": {}, "t0_monotonic_ns": T0, "window_s": 0.001}
        for role, tr in (("inference", inference), ("training", training)):
            rel = core.pair_trace_relpath("i", "t", role)
            os.makedirs(os.path.dirname(os.path.join(self.dir, rel)), exist_ok=True)
            core.write_trace(os.path.join(self.dir, rel), tr.doc(), tr.clock)
            rec["traces"][role] = rel
        return measure.analyze_pair(self.dir, rec)

    def test_known_shares_without_overlap(self):
        got = self.analyze(two_requests(), trainer())
        self.assertEqual(got["clock"]["inference"]["method"], "marks")
        self.assertLessEqual(got["clock"]["training"]["error_us"], 0.5)
        sh = got["shares"]
        # Both have work while a request is pending: [100, 250] and [600, 800].
        self.assertAlmostEqual(sh["both_pending_ms"], 0.35)
        # In it the trainer ran 40 + 40 µs, the requests 100 + 150, 10 + 10 idle.
        self.assertAlmostEqual(sh["busy_ms"], 0.33)
        self.assertAlmostEqual(sh["idle_ms"], 0.02)
        self.assertEqual(sh["overlap_ms"], 0.0)
        self.assertAlmostEqual(sh["inference"]["share"], round(250 / 330, 4))
        self.assertAlmostEqual(sh["training"]["share"], round(80 / 330, 4))
        for side in ("inference", "training"):
            self.assertEqual(sh[side]["share_min"], sh[side]["share"])
            self.assertEqual(sh[side]["share_max"], sh[side]["share"])
        self.assertAlmostEqual(sh["training"]["pending_ms"], 1.0)
        self.assertEqual((sh["inference"]["kernels"], sh["training"]["kernels"]), (3, 3))
        # One switch per request (trainer -> request) after a 10 µs gap; every
        # turn is cut by an edge of "both have work".
        self.assertEqual(sh["switches"], 2)
        self.assertAlmostEqual(sh["switch_gap_us"]["mean"], 10.0)
        self.assertEqual(sh["cut_turns"], 4)

    def test_preempted_kernel_overlap(self):
        # A trainer kernel spans a request's kernel: time slicing preempted it.
        inf = Trace().kernel(90, 100, 200)
        got = self.analyze(inf, Trace().kernel(-10, 0, 500))["shares"]
        self.assertAlmostEqual(got["both_pending_ms"], 0.11)
        self.assertAlmostEqual(got["overlap_ms"], 0.1)
        # The overlap goes to the kernel that started last: the request's.
        self.assertAlmostEqual(got["inference"]["share"], round(100 / 110, 4))
        self.assertEqual(got["inference"]["share_min"], 0.0)
        self.assertAlmostEqual(got["training"]["share"], round(10 / 110, 4))
        self.assertEqual(got["training"]["share_max"], 1.0)

    def test_clocks_aligned_by_the_marks(self):
        # The trainer's trace clock runs 5 ms ahead of the other's: its marks
        # put its kernels back where they ran.
        want = self.analyze(two_requests(), trainer())["shares"]
        got = self.analyze(two_requests(), trainer(skew_ns=5000000))
        self.assertEqual(got["shares"], want)
        self.assertEqual(got["clock"]["training"]["method"], "marks")

    def test_realtime_fallback(self):
        # No mark events in the trace: its timestamps are read as
        # CLOCK_REALTIME after baseTimeNanoseconds, through the marks'
        # realtime - monotonic pairs.
        want = self.analyze(two_requests(), trainer())["shares"]
        got = self.analyze(two_requests(), trainer(marks=False))
        self.assertEqual(got["clock"]["training"]["method"], "realtime")
        self.assertEqual(got["shares"], want)
        with self.assertRaises(ValueError):
            core.trace_clock({"traceEvents": []})

    def test_unreadable_trace(self):
        got = measure.analyze_pair(self.dir, {"traces": {"inference": "nope.json.gz", "training": "nope"},
                                              "t0_monotonic_ns": T0, "window_s": 0.001})
        self.assertIsNone(got["shares"])
        self.assertIn("nope.json.gz", got["shares_error"])

    def test_turns_between_switches(self):
        a = [(0, 0, 100), (0, 310, 400), (0, 610, 700)]
        b = [(0, 110, 300), (0, 410, 600), (0, 710, 1000)]
        sh = core.timeslice_share([a, b], 0, 1000)
        # Both have work until the first side's last kernel ends (700).
        self.assertEqual(sh["switches"], 4)
        self.assertEqual(sh["cut_turns"], 2)
        self.assertEqual((sh["inference"]["turns"], sh["training"]["turns"]), (1, 2))
        self.assertAlmostEqual(sh["inference"]["turn_us"]["mean"], 0.09)
        self.assertAlmostEqual(sh["training"]["turn_us"]["mean"], 0.19)
        self.assertAlmostEqual(sh["switch_gap_us"]["mean"], 0.01)
        self.assertAlmostEqual(sh["inference"]["share"], round(280 / 660, 4))

    def test_no_common_work(self):
        sh = core.timeslice_share([[(0, 0, 100)], [(200, 200, 300)]], 0, 1000)
        self.assertEqual(sh["both_pending_ms"], 0.0)
        self.assertIsNone(sh["inference"]["share"])
        self.assertEqual(sh["switches"], 0)

    def test_slim_trace(self):
        doc = two_requests().doc()
        doc["traceEvents"] += [{"ph": "M", "name": "process_name", "pid": 1}, {"ph": "s", "cat": "ac2g", "id": 1}]
        slim = core.slim_trace(doc)
        self.assertEqual(slim["baseTimeNanoseconds"], BASE)
        self.assertEqual(sorted(set(str(e.get("cat")) for e in slim["traceEvents"])),
                         ["None", "cuda_runtime", "kernel", "user_annotation"])
        self.assertEqual(core.slim_trace([{"ph": "X", "cat": "kernel"}, {"ph": "X", "cat": "cpu_op"}]),
                         {"traceEvents": [{"ph": "X", "cat": "kernel"}]})

    def test_memsets_count_as_work(self):
        tr = Trace().kernel(0, 10, 20, cat="gpu_memset").kernel(0, 20, 30)
        off = core.trace_clock(dict(tr.doc(), **{core.TRACE_CLOCK_KEY: tr.clock}))["offset_ns"]
        self.assertEqual([w[1:] for w in core.trace_gpu_work(tr.doc(), off)], [(us(10), us(20)), (us(20), us(30))])


class Intervals(unittest.TestCase):
    def test_union_intersect(self):
        self.assertEqual(core.union([(5, 7), (0, 2), (1, 3), (4, 4)]), [(0, 3), (5, 7)])
        self.assertEqual(core.intersect([(0, 3), (5, 7)], [(2, 6)]), [(2, 3), (5, 6)])
        self.assertEqual(core.length([(2, 3), (5, 6)]), 2)


if __name__ == "__main__":
    unittest.main()
