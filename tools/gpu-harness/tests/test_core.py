"""The pure logic: statistics, schedules, plan and budget, MPS commands and
parsers, nvidia-smi parsers, the protocol, the measurements document."""

import json
import math
import os
import tempfile
import threading
import time
import unittest

import testlib  # noqa: F401  (puts the harness on sys.path)
import core
import workloads


class Percentiles(unittest.TestCase):
    def test_quantile_matches_numpy_linear(self):
        # numpy.percentile([1, 2, 3, 4], q) with the default (linear) method.
        xs = [1.0, 2.0, 3.0, 4.0]
        self.assertAlmostEqual(core.quantile_sorted(xs, 0.5), 2.5)
        self.assertAlmostEqual(core.quantile_sorted(xs, 0.9), 3.7)
        self.assertAlmostEqual(core.quantile_sorted(xs, 0.99), 3.97)
        self.assertEqual(core.quantile_sorted(xs, 1.0), 4.0)
        self.assertEqual(core.quantile_sorted([7.0], 0.99), 7.0)
        # numpy.percentile(range(1, 101), 99) == 99.01; 95 -> 95.05
        r = [float(i) for i in range(1, 101)]
        self.assertAlmostEqual(core.quantile_sorted(r, 0.99), 99.01)
        self.assertAlmostEqual(core.quantile_sorted(r, 0.95), 95.05)
        self.assertAlmostEqual(core.quantile_sorted(r, 0.50), 50.5)

    def test_summarize(self):
        s = core.summarize([4, 1, 3, 2])
        self.assertEqual(s, {"mean": 2.5, "p50": 2.5, "p90": 3.7, "p95": 3.85, "p99": 3.97})
        self.assertEqual(core.summarize([]), {})
        # Values that round to 0 are left out (the format wants > 0).
        self.assertNotIn("p50", core.summarize([0.00001, 0.00001, 1.0]))

    def test_quantile_of_nothing(self):
        with self.assertRaises(ValueError):
            core.quantile_sorted([], 0.5)


class Poisson(unittest.TestCase):
    def test_seeded_and_deterministic(self):
        a = core.poisson_offsets(100.0, 500, 3)
        self.assertEqual(a, core.poisson_offsets(100.0, 500, 3))
        self.assertNotEqual(a, core.poisson_offsets(100.0, 500, 4))
        self.assertTrue(all(y > x for x, y in zip(a, a[1:])))
        self.assertEqual(len(a), 500)

    def test_rate(self):
        n, rate = 20000, 250.0
        a = core.poisson_offsets(rate, n, 1)
        gaps = [a[0]] + [y - x for x, y in zip(a, a[1:])]
        m = sum(gaps) / n
        self.assertAlmostEqual(m, 1 / rate, delta=0.03 / rate)
        # Exponential: the standard deviation equals the mean.
        sd = math.sqrt(sum((g - m) ** 2 for g in gaps) / n)
        self.assertAlmostEqual(sd / m, 1.0, delta=0.05)

    def test_colocd_arrivals(self):
        # Go: rand.New(rand.NewPCG(1, 0x636f6c6f6364)), t += ExpFloat64() * 1e6/rate
        # (predictor/arrivals.go); values printed by Go 1.26 at rate 100.
        a = core.poisson_offsets(100.0, 5, 1)
        want_us = [5228.857346383258, 35784.32205371997, 37298.549516878236, 38674.65229472744,
                   38762.31025141979]
        self.assertEqual(a, [w / 1e6 for w in want_us])
        import gorand
        self.assertEqual(gorand.colocd_arrivals_us(100.0, 5, 1), want_us)

    def test_go_pcg(self):
        import gorand
        r = gorand.PCG(1, 2)
        # rand.NewPCG(1, 2).Uint64() three times, from Go.
        self.assertEqual([r.uint64() for _ in range(3)],
                         [14192431797130687760, 11371241257079532652, 14470142590855381128])
        # 200,000 ExpFloat64 draws (tail paths included): Go's sum and last value.
        p = gorand.PCG(7, gorand.COLOCD_STREAM)
        s = 0.0
        for _ in range(200000):
            last = p.exp_float64()
            s += last
        self.assertEqual((s, last), (199611.52866516018, 0.6670880203286877))

    def test_bad_rate(self):
        with self.assertRaises(ValueError):
            core.poisson_offsets(0, 3, 1)


class Windows(unittest.TestCase):
    def test_request_times(self):
        lat, svc = core.request_times([0, 10, 20], [0, 15, 30], [15, 30, 40])
        self.assertEqual(lat, [15e-6, 20e-6, 20e-6])
        self.assertEqual(svc, [15e-6, 15e-6, 10e-6])
        with self.assertRaises(ValueError):
            core.request_times([0], [0], [])
        with self.assertRaises(ValueError):
            core.request_times([10], [10], [5])

    def test_iterations_in_window(self):
        ms = 1000000
        iters = [(0, 100 * ms), (100 * ms, 220 * ms), (220 * ms, 330 * ms), (330 * ms, 450 * ms)]
        its, partial = core.iterations_in_window(iters, 90 * ms, 340 * ms)
        self.assertEqual(its, [120.0, 110.0])
        self.assertFalse(partial)
        its, partial = core.iterations_in_window(iters, 110 * ms, 200 * ms)
        self.assertEqual(its, [120.0])
        self.assertTrue(partial)
        self.assertEqual(core.iterations_in_window([], 0, 1), ([], True))

    def test_trainer_covers(self):
        iters = [(0, 10), (10, 20), (20, 30)]
        self.assertTrue(core.trainer_covers(iters, 5, 25))
        self.assertTrue(core.trainer_covers(iters, 0, 30))
        self.assertFalse(core.trainer_covers(iters, 5, 31))   # stopped before the window ended
        self.assertFalse(core.trainer_covers(iters[1:], 5, 25))  # started after it began
        self.assertFalse(core.trainer_covers([], 0, 1))


class Plan(unittest.TestCase):
    def test_defaults_cover_the_issue(self):
        cfg = core.Config()
        self.assertEqual(cfg.inference, ["resnet50-infer", "bert-infer", "gpt-decode"])
        self.assertEqual(cfg.training, ["resnet50-train", "gpt2-train", "bert-train"])
        self.assertEqual(cfg.mps_pcts, [100, 50, 25])
        for n in cfg.inference + cfg.training:
            self.assertIn(n, workloads.SPECS)
        with self.assertRaises(KeyError):
            core.Config(nope=1)

    def test_plan_windows(self):
        cfg = core.Config()
        g = core.plan_windows(cfg)
        ts = [x for x in g if x["mode"] == "timeslice"]
        mps = [x for x in g if x["mode"] == "mps"]
        self.assertEqual(len(ts), 3)
        self.assertEqual(core.count_windows(ts), 3 * 3 * 2)
        self.assertEqual(len(mps), 9)
        self.assertEqual(core.count_windows(mps), 27)
        self.assertEqual([x["pct"] for x in mps[::3]], [100, 50, 25])
        # time-slicing first: its data is in hand if MPS fails
        self.assertEqual(g[0]["mode"], "timeslice")
        self.assertEqual(core.count_windows(core.plan_windows(cfg, mps=False)), 18)

    def test_fit_windows(self):
        cfg = core.Config()
        items = [(100.0, None), (50.0, 100.0), (400.0, None)]
        # Plenty of time: the longest window.
        w, tight, cost = core.fit_windows(1000, items, cfg)
        self.assertEqual((w, tight), (cfg.max_window_s, False))
        self.assertAlmostEqual(cost, core.window_cost(w, items, cfg))
        # A squeeze: the cost fits the free time, and just so.
        w, tight, cost = core.fit_windows(12, items, cfg)
        self.assertFalse(tight)
        self.assertLessEqual(cost, 12)
        self.assertGreater(core.window_cost(w + 0.05, items, cfg), 12 - 0.5)
        self.assertTrue(cfg.min_window_s <= w < cfg.max_window_s)
        # Not even the minimum fits.
        w, tight, _ = core.fit_windows(1, items, cfg)
        self.assertEqual((w, tight), (cfg.min_window_s, True))
        self.assertEqual(core.fit_windows(5, [], cfg), (cfg.max_window_s, False, 0.0))

    def test_window_cost_counts_the_request_floor(self):
        cfg = core.Config()
        # At 10 req/s the floor of min_requests dominates: 15 s, not 2.
        self.assertAlmostEqual(core.window_cost(2.0, [(10.0, None)], cfg),
                               cfg.min_requests / 10.0 + cfg.est_window_overhead_s)

    def test_window_items(self):
        groups = [{"mode": "mps", "pct": 50, "training": "t", "windows": [{"inference": "i", "load": 0.3},
                                                                          {"inference": "j", "load": 0.3}]}]
        items = core.window_items(groups, {("i", "0.30"): 75.0}, {"t": 100.0}, core.Config())
        self.assertEqual(items, [(75.0, 200.0)])

    def test_requests_for(self):
        cfg = core.Config()
        self.assertEqual(core.requests_for(3.0, 100.0, cfg), 300)
        self.assertEqual(core.requests_for(0.1, 100.0, cfg), cfg.min_requests)
        self.assertEqual(core.requests_for(100.0, 100.0, cfg), cfg.max_requests)
        # long enough for min_train_iters iterations of 400 ms: 4*0.4 s at 100 rps
        self.assertEqual(core.requests_for(1.0, 100.0, cfg, train_iter_ms=400.0), 160)

    def test_colocated_iter_ms(self):
        cfg = core.Config()
        self.assertEqual(core.colocated_iter_ms(100.0, "timeslice", None, cfg), 100.0 * cfg.slowdown_guess)
        self.assertEqual(core.colocated_iter_ms(100.0, "mps", 25, cfg), 400.0)
        self.assertIsNone(core.colocated_iter_ms(None, "mps", 25, cfg))

    def test_rate_for(self):
        self.assertEqual(core.rate_for(0.3, 4.0), 75.0)
        with self.assertRaises(ValueError):
            core.rate_for(1.2, 4.0)
        with self.assertRaises(ValueError):
            core.rate_for(0.3, 0)

    def test_budget_fits(self):
        cfg = core.Config()
        phases = core.estimate_budget(cfg, workloads.guesses())
        total = sum(p[1] for p in phases)
        self.assertLessEqual(total, cfg.budget_s + 1e-6)
        self.assertGreater(total, 0.8 * cfg.budget_s)
        names = [p[0] for p in phases]
        self.assertTrue(any("timeslice co-located" in n for n in names))
        self.assertTrue(any("mps co-located" in n for n in names))
        # Under 10 minutes with room for the script around it.
        self.assertLess(cfg.budget_s, 600 - 60)
        # The opt-in phases cost nothing unless asked for.
        self.assertEqual(core.trace_pairs_estimate(cfg), 0.0)
        self.assertEqual(core.spin_sweep_estimate(cfg, workloads.guesses()), 0.0)
        self.assertFalse(any("traced" in n or "spin" in n for n in names))

    def test_budget_with_opt_in_phases(self):
        # Both opt-in phases fit BUDGET_S=380 (HARD_S 440: one run under 10
        # minutes) without shrinking the windows below the default run's.
        cfg = core.Config(ts_traces=True, spin_sweep=True, budget_s=380.0)
        g = workloads.guesses()
        phases = core.estimate_budget(cfg, g)
        total = sum(p[1] for p in phases)
        self.assertLessEqual(total, cfg.budget_s + 1e-6)
        self.assertLess(cfg.budget_s + 60, 600 - 60)
        names = [p[0] for p in phases]
        traced = names.index("time slicing traced from both sides (9 pairs)")
        self.assertEqual(names[traced - 1], "timeslice co-located windows (18)")
        self.assertIn("MPS spin sweep (4 trainers)", names)
        self.assertEqual(core.trace_pairs(cfg)[:2], [("resnet50-infer", "resnet50-train"), ("bert-infer", "resnet50-train")])
        self.assertAlmostEqual(core.trace_pairs_estimate(cfg), 9 * (0.3 + 0.5 + 3.0))
        self.assertLess(core.trace_pairs_estimate(cfg) + core.spin_sweep_estimate(cfg, g), 80)
        default = [p for p in core.estimate_budget(core.Config(), g) if "co-located" in p[0]]
        for p, d in zip([p for p in phases if "co-located" in p[0]], default):
            self.assertGreaterEqual(p[1], d[1] - 1e-6, p[0])

    def test_record_name(self):
        self.assertEqual(core.record_name("a", "b", "timeslice", 0.3), "a+b@ts,load=0.30")
        self.assertEqual(core.record_name("a", "b", "mps", 0.3, 50), "a+b@mps50,load=0.30")


class MPS(unittest.TestCase):
    def test_env(self):
        base = {"PATH": "/bin", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "10"}
        d = core.mps_env(base, "/tmp/p", "/tmp/l")
        self.assertEqual(d["CUDA_MPS_PIPE_DIRECTORY"], "/tmp/p")
        self.assertEqual(d["CUDA_MPS_LOG_DIRECTORY"], "/tmp/l")
        self.assertNotIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", d)
        c = core.mps_env(base, "/tmp/p", "/tmp/l", pct=25, visible="GPU-1")
        self.assertEqual(c["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "25")
        self.assertEqual(c["CUDA_VISIBLE_DEVICES"], "GPU-1")
        self.assertEqual(core.mps_env(base, "/p", "/l", pct=100)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "100")
        for bad in (0, 101, -5):
            with self.assertRaises(ValueError):
                core.mps_env(base, "/p", "/l", pct=bad)
        with self.assertRaises(ValueError):
            core.mps_env(base, "", "/l")
        self.assertEqual(base["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "10")  # not modified

    def test_plain_env_drops_mps(self):
        e = core.plain_env({"A": "1", "CUDA_MPS_PIPE_DIRECTORY": "/x", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "5"})
        self.assertEqual(e, {"A": "1"})

    def test_commands(self):
        self.assertEqual(core.daemon_start_argv("nvidia-cuda-mps-control"), ["nvidia-cuda-mps-control", "-d"])
        self.assertEqual(core.control_argv("c"), ["c"])
        self.assertEqual(core.control_input("quit"), "quit\n")
        self.assertEqual(core.control_input("terminate_client", 12, 34), "terminate_client 12 34\n")
        for bad in (("rm", ), ("terminate_client", "1; quit"), ("get_client_list", "-1"),
                    ("set_default_active_thread_percentage", 5)):
            with self.assertRaises(ValueError):
                core.control_input(*bad)

    def test_parsers(self):
        self.assertEqual(core.parse_pid_lines("123\n\n456\n"), [123, 456])
        self.assertEqual(core.parse_pid_lines(""), [])
        with self.assertRaises(ValueError):
            core.parse_pid_lines("Cannot find MPS control daemon process")
        ps = ("PID ID SERVER DEVICE NAMESPACE COMMAND\n"
              "9031 1 8980 GPU-0a1b2c3d 4026531836 python3 worker.py --role inference\n")
        rows = core.parse_ps(ps)
        self.assertEqual(rows[0]["pid"], 9031)
        self.assertEqual(rows[0]["server"], 8980)
        self.assertEqual(rows[0]["command"], "python3 worker.py --role inference")
        self.assertEqual(core.parse_ps(""), [])
        with self.assertRaises(ValueError):
            core.parse_ps("garbage\n")

    def test_attachment(self):
        log = "[2026] NEW CLIENT 11 from user 0: Server already exists\n"
        ok, ev = core.mps_attachment([10, 11], [99], [{"pid": 10}], {}, log)
        self.assertTrue(ok, ev)
        ok, ev = core.mps_attachment([10, 12], [99], [{"pid": 10}], {99: []}, log)
        self.assertFalse(ok)
        self.assertEqual(ev["missing"], [12])
        # no server: a client that found no daemon ran without MPS
        ok, _ = core.mps_attachment([10], [], [], {}, "NEW CLIENT 10 from user 0")
        self.assertFalse(ok)


class SMI(unittest.TestCase):
    def test_query(self):
        text = "NVIDIA H200, GPU-5f2a, 580.159.04, Default, Disabled, 143771\n"
        g = core.parse_smi_query(text)[0]
        self.assertEqual(g["name"], "NVIDIA H200")
        self.assertEqual(g["compute_mode"], "Default")
        self.assertEqual(g["driver_version"], "580.159.04")
        with self.assertRaises(ValueError):
            core.parse_smi_query("a, b\n")

    def test_cuda_version(self):
        banner = "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0     |"
        self.assertEqual(core.parse_smi_cuda_version(banner), "13.0")
        self.assertIsNone(core.parse_smi_cuda_version("nothing"))

    def test_sharing_allowed(self):
        self.assertEqual(core.sharing_allowed("Default"), {"timeslice": None, "mps": None})
        a = core.sharing_allowed("Exclusive_Process")
        self.assertIsNotNone(a["timeslice"])
        self.assertIsNone(a["mps"])
        a = core.sharing_allowed("Prohibited")
        self.assertIsNotNone(a["timeslice"])
        self.assertIsNotNone(a["mps"])


class Protocol(unittest.TestCase):
    def test_encode_decode(self):
        self.assertEqual(core.decode(core.encode({"cmd": "x", "n": [1, 2]})), {"cmd": "x", "n": [1, 2]})
        with self.assertRaises(ValueError):
            core.decode("[1]")
        with self.assertRaises(ValueError):
            core.encode({"x": float("nan")})

    def test_line_reader(self):
        r, w = os.pipe()
        lr = core.LineReader(r)
        self.assertIsNone(lr.poll())
        os.write(w, b'{"a": 1}\n{"b"')
        self.assertEqual(lr.readline(1), '{"a": 1}')
        t = time.monotonic()
        self.assertIsNone(lr.readline(0.05))  # a partial line is not a line
        self.assertGreaterEqual(time.monotonic() - t, 0.04)

        def later():
            time.sleep(0.05)
            os.write(w, b': 2}\n')
        th = threading.Thread(target=later)
        th.start()
        self.assertEqual(lr.readline(5), '{"b": 2}')
        th.join()
        os.close(w)
        with self.assertRaises(EOFError):
            lr.readline(1)
        os.close(r)


class Measurements(unittest.TestCase):
    def window(self, **kw):
        w = {"mode": "timeslice", "pct": None, "inference": "i", "training": "t", "load": 0.3, "rate_rps": 75.0,
             "latency_ms": {"mean": 5.0, "p50": 4.0, "p90": 8.0, "p95": 9.0, "p99": 12.0},
             "service_ms": {"mean": 4.0, "p99": 6.0}, "training_iteration_ms": 120.123456,
             "requests": 200, "seed": 1007}
        w.update(kw)
        return w

    def test_build(self):
        profiles = {"i": "profiles/i.json", "t": "profiles/t.json"}
        doc = core.build_measurements("src", {"name": "NVIDIA H200", "sms": 132},
                                      [self.window(), self.window(mode="mps", pct=50),
                                       self.window(inference="missing")], profiles)
        self.assertEqual(core.check_measurements(doc), [])
        self.assertEqual(len(doc["records"]), 2)
        r0, r1 = doc["records"]
        self.assertEqual(r0["mode"], "timeslice")
        self.assertNotIn("training_pct", r0)
        self.assertEqual(r0["training"], ["profiles/t.json"])
        self.assertEqual(r0["measured"]["training_iteration_ms"], 120.1235)
        self.assertEqual((r0["requests"], r0["seed"]), (200, 1007))
        self.assertEqual(r1["training_pct"], 50)
        self.assertEqual(r1["name"], "i+t@mps50,load=0.30")
        self.assertEqual(doc["device"], {"name": "NVIDIA H200", "sms": 132})
        json.dumps(doc, allow_nan=False)

    def test_check_catches(self):
        doc = {"format": core.MEASUREMENTS_FORMAT, "records": [
            {"name": "", "mode": "mps", "inference": "x", "training": ["y"], "rate_rps": 0,
             "measured": {"latency_ms": {"p42": 1}, "training_iteration_ms": [1, 2]}}]}
        errs = "\n".join(core.check_measurements(doc))
        for want in ("name", "rate_rps", "training_pct", "p42", "one per training job"):
            self.assertIn(want, errs)

    def test_source(self):
        env = {"device_name": "NVIDIA H200", "sms": 132, "driver_version": "580.1", "torch": "2.11.0"}
        s = core.source_string(env, "2026-11-29T00:00:00Z")
        self.assertIn("NVIDIA H200", s)
        self.assertIn("driver 580.1", s)
        self.assertIn("torch 2.11.0", s)
        self.assertNotIn("SYNTHETIC", s)
        self.assertTrue(core.source_string(env, "now", backend="fake").startswith("SYNTHETIC"))

    def test_import_argv(self):
        a = core.import_argv("colocd", "t.json.gz", "p.json", "bert-infer", "inference")
        self.assertEqual(a[:4], ["colocd", "profile", "import", "--format"])
        self.assertIn("--annotation", a)
        self.assertEqual(a[a.index("--annotation") + 1], "request")
        self.assertEqual(a[-1], "t.json.gz")
        b = core.import_argv("colocd", "t.json.gz", "p.json", "bert-train", "training")
        self.assertNotIn("--annotation", b)
        self.assertNotIn("--unit-ms", b)
        self.assertEqual(b[b.index("--kind") + 1], "training")
        c = core.import_argv("colocd", "t.json.gz", "p.json", "bert-train", "training", 30.4498)
        self.assertEqual(c[c.index("--unit-ms") + 1], "30.4498")
        self.assertEqual(c[-1], "t.json.gz")

    def test_solo_unit_ms(self):
        self.assertEqual(core.solo_unit_ms({"service_backtoback_ms": {"mean": 4.82}, "rates": {}}), 4.82)
        self.assertEqual(core.solo_unit_ms({"iteration_ms": {"mean": 30.45}, "n": 20}), 30.45)
        self.assertIsNone(core.solo_unit_ms({}))
        self.assertIsNone(core.solo_unit_ms(None))

    def test_write_json_atomic(self):
        d = tempfile.mkdtemp()
        p = os.path.join(d, "sub", "x.json")
        core.write_json_atomic(p, {"a": 1})
        core.write_json_atomic(p, {"a": 2})
        with open(p) as f:
            self.assertEqual(json.load(f), {"a": 2})
        self.assertEqual(os.listdir(os.path.dirname(p)), ["x.json"])
        with self.assertRaises(ValueError):
            core.write_json_atomic(p, {"a": float("inf")})
        with open(p) as f:
            self.assertEqual(json.load(f), {"a": 2})

    def test_workload_key(self):
        self.assertEqual(core.workload_key(["b", "a"]), "a+b")


class Workloads(unittest.TestCase):
    def test_imports_without_torch(self):
        import subprocess
        import sys
        code = ("import sys; sys.path.insert(0, %r); import workloads, core, measure; "
                "assert 'torch' not in sys.modules, 'torch imported'; print(len(workloads.SPECS))" % testlib.HARNESS)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "10")

    def test_specs(self):
        self.assertEqual(sorted(workloads.names("inference")), ["bert-infer", "gpt-decode", "resnet50-infer"])
        self.assertEqual(sorted(workloads.names("training")), ["bert-train", "gpt2-train", "resnet50-train",
                                                                   "spin-long-train", "spin-mem-high-train",
                                                                   "spin-mem-low-train", "spin-short-train"])
        self.assertEqual(workloads.SPECS["resnet50-infer"]["batch"], 8)
        self.assertEqual(workloads.SPECS["bert-infer"]["seq"], 128)
        self.assertEqual(workloads.SPECS["resnet50-train"]["batch"], 64)
        with self.assertRaises(KeyError):
            workloads.Workload("nope")

    def test_spin_memory_variants(self):
        # Memory traffic varied at spin-short-train's block time and work.
        short = workloads.SPECS["spin-short-train"]
        low, high = workloads.SPECS["spin-mem-low-train"], workloads.SPECS["spin-mem-high-train"]
        for s in (low, high):
            for k in ("block_us", "fma_pairs", "iter_ms", "model"):
                self.assertEqual(s[k], short[k], k)
        self.assertNotIn("mem_bytes", short)
        self.assertLess(low["mem_bytes"], high["mem_bytes"])
        # Whole 16-byte loads per thread of a block.
        for s in (low, high):
            self.assertEqual(s["mem_bytes"] % (16 * workloads.SpinWorkload.THREADS), 0)

    def test_fake_backend_has_every_workload(self):
        import fake
        self.assertEqual(sorted(fake.FAKE), sorted(workloads.SPECS))
        for n, s in workloads.SPECS.items():
            self.assertEqual(fake.FAKE[n][0], s["kind"], n)
        self.assertTrue(all(n in workloads.SPECS for n in core.Config().spin_training))


if __name__ == "__main__":
    unittest.main()
