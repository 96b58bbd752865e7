"""The fake backend: a worker with no GPU and no torch, for dry runs and tests.

A fake workload's request or iteration is a sleep; a fake trace is a small
synthetic Kineto trace in the layout colocd's importer reads (kernels,
launches matched by correlation, "request" annotations or ProfilerStep#N,
deviceProperties). Co-location is mimicked through files in FAKE_GPU_DIR: a
training worker marks itself busy there while it trains, and an inference
request then sleeps longer. Under a fake MPS daemon (fake_mps_control.py) a
worker "attaches" by appending its PID to the pipe directory's client list,
the way control.log would record it.

A traced window (worker.py's traced command) records each fake unit as one
kernel, launched at the unit's start and running through its last 80 %, on a
trace clock that is CLOCK_REALTIME shifted by FAKE_TRACE_SKEW_NS, so that
only the clock marks align two fake traces. The fake GPU does not serialize
contexts: the shares it yields describe nothing.

Nothing produced by this backend is a measurement; measure.py marks its
output SYNTHETIC.
"""

import gzip
import json
import os
import random
import time

import core
import workloads

# name: (kind, unit ms, kernels per unit)
FAKE = {
    "resnet50-infer": ("inference", 3.0, 12),
    "bert-infer": ("inference", 2.5, 10),
    "gpt-decode": ("inference", 1.5, 8),
    "resnet50-train": ("training", 30.0, 40),
    "gpt2-train": ("training", 25.0, 30),
    "bert-train": ("training", 20.0, 30),
    "spin-long-train": ("training", 30.0, 30),
    "spin-short-train": ("training", 30.0, 600),
    "spin-mem-low-train": ("training", 30.0, 600),
    "spin-mem-high-train": ("training", 30.0, 600),
}
FAKE_DEVICE = {"name": "FAKE GPU (synthetic, no GPU)", "sms": 132}
FAKE_TRACE_BASE_NS = 1700000000000000000
FAKE_TRACE_SKEW_NS = 123456789


def _gpu_dir():
    return os.environ.get("FAKE_GPU_DIR")


def _pct():
    return float(os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100"))


class FakeBackend(object):
    def __init__(self, args):
        self.args = args
        self.names = []
        self.rng = random.Random(args.seed)
        self.scale = float(os.environ.get("FAKE_TIME_SCALE", "1"))
        self._trace = None

    def init(self, names):
        for n in names:
            if n not in FAKE:
                raise KeyError("unknown fake workload %r" % n)
        self.names = list(names)
        pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
        # A fake MPS client attaches only if the fake daemon runs (and the
        # caller has not its own way to attach: FAKE_MPS_ATTACH=0).
        attach = os.environ.get("FAKE_MPS_ATTACH", "1") != "0"
        if attach and pipe and os.path.exists(os.path.join(pipe, "nvidia-cuda-mps-control.pid")):
            with open(os.path.join(pipe, "fake-clients"), "a") as f:
                f.write("%d\n" % os.getpid())
            log = os.environ.get("CUDA_MPS_LOG_DIRECTORY")
            if log:
                with open(os.path.join(log, "control.log"), "a") as f:
                    f.write("[fake] NEW CLIENT %d from user %d: Server already exists\n" % (os.getpid(), os.getuid()))
        time.sleep(0.02)
        wl = {n: {"kind": FAKE[n][0], "params": 0, "fake": True} for n in names}
        for n in names:
            spec = workloads.SPECS.get(n) or {}
            if spec.get("model") == "spin":  # what SpinWorkload.info says, as specified (not timed)
                wl[n].update({"block_us": spec["block_us"], "mem_bytes_per_block": spec.get("mem_bytes", 0)})
        env = {"backend": "fake", "torch": None, "device_name": FAKE_DEVICE["name"], "sms": FAKE_DEVICE["sms"]}
        return {"workloads": wl, "env": env}

    def kind(self, name):
        return FAKE[name][0]

    def _busy_path(self):
        d = _gpu_dir()
        return os.path.join(d, "trainer-%d" % os.getpid()) if d else None

    def begin_train(self, name):
        p = self._busy_path()
        if p:
            with open(p, "w") as f:
                f.write("%g\n" % _pct())

    def end_train(self, name):
        p = self._busy_path()
        if p and os.path.exists(p):
            os.unlink(p)

    def _contention(self):
        d = _gpu_dir()
        if not d or not os.path.isdir(d):
            return 1.0
        f = 1.0
        for n in os.listdir(d):
            if n.startswith("trainer-"):
                try:
                    with open(os.path.join(d, n)) as fh:
                        pct = float(fh.read().strip() or 100)
                except (OSError, ValueError):
                    continue
                mps = bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY"))
                f += (0.2 + 0.3 * pct / 100) if mps else 0.8
        return f

    def step(self, name):
        kind, ms, _ = FAKE[name]
        fail = os.environ.get("FAKE_TRAIN_FAIL_AFTER")
        if kind == "training" and fail:
            self.steps = getattr(self, "steps", 0) + 1
            if self.steps > int(fail):
                raise RuntimeError("fake trainer failure (FAKE_TRAIN_FAIL_AFTER=%s)" % fail)
        if kind == "inference":
            t = ms * self._contention()
        else:
            t = ms * (100.0 / _pct()) ** 0.5
        t *= 1 + 0.1 * self.rng.random()
        s = time.monotonic_ns()
        time.sleep(t * self.scale / 1e3)
        if self._trace is not None:
            self._trace_unit(s, time.monotonic_ns())

    def sync(self, name):
        pass

    def profile(self, name, path, steps):
        write_fake_trace(path, name, steps + 2, seed=self.args.seed)

    # -- a traced window ---------------------------------------------------

    def _ts_us(self, mono_ns):
        return round((mono_ns + self._trace["realtime_off"] + FAKE_TRACE_SKEW_NS - FAKE_TRACE_BASE_NS) / 1e3, 3)

    def start_trace(self, name):
        self._trace = {"realtime_off": time.time_ns() - time.monotonic_ns(), "events": []}

    def _trace_unit(self, s, e):
        ev = self._trace["events"]
        corr = len(ev) + 1
        k = s + (e - s) // 5
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": os.getpid(),
                   "tid": os.getpid(), "ts": self._ts_us(s), "dur": 3.0, "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": "fake_kernel", "pid": 0, "tid": 7, "ts": self._ts_us(k),
                   "dur": round((e - k) / 1e3, 3), "args": {"correlation": corr, "device": 0, "stream": 7}})

    def mark(self, label):
        ev = self._trace["events"]

        class annotate(object):
            def __enter__(inner):
                inner.t = time.monotonic_ns()

            def __exit__(inner, *exc):
                ev.append({"ph": "X", "cat": "user_annotation", "name": label, "pid": os.getpid(),
                           "tid": os.getpid(), "ts": self._ts_us(inner.t), "dur": 1.0, "args": {}})
        return core.clock_mark(label, annotate)

    def stop_trace(self, name, path, clock):
        doc = {"schemaVersion": 1, "baseTimeNanoseconds": FAKE_TRACE_BASE_NS, "traceEvents": self._trace["events"],
               "deviceProperties": [{"id": 0, "name": FAKE_DEVICE["name"], "numSms": FAKE_DEVICE["sms"]}]}
        self._trace = None
        core.write_trace(path, doc, clock)


def fake_trace(name, units, seed=0):
    """A synthetic Kineto trace of `units` units of a fake workload."""
    kind, ms, kernels = FAKE[name]
    rng = random.Random("%s-%d" % (name, seed))
    ev = []
    t = 1700000000000000.0  # µs, like the epoch timestamps of real traces
    corr = 1
    for u in range(units):
        unit_start = t
        unit_us = ms * 1000.0
        launch_t = unit_start + 5
        kt = unit_start + 20
        for k in range(kernels):
            dur = unit_us / kernels * 0.8 * (0.5 + rng.random())
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": round(launch_t, 3), "dur": 3.0, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": "fake_kernel_%d%s" % (k, "_gemm" if k % 3 == 0 else ""),
                       "pid": 0, "tid": 7, "ts": round(kt, 3), "dur": round(dur, 3),
                       "args": {"correlation": corr, "device": 0, "stream": 7,
                                "blocks per SM": round(0.2 + rng.random() * 2, 3),
                                "est. achieved occupancy %": rng.randint(10, 100)}})
            corr += 1
            launch_t += 4
            kt += dur + unit_us / kernels * 0.2
        end = max(kt, launch_t) + 10
        ann = "request" if kind == "inference" else "ProfilerStep#%d" % u
        ev.append({"ph": "X", "cat": "user_annotation", "name": ann, "pid": 1, "tid": 1,
                   "ts": round(unit_start, 3), "dur": round(end - unit_start, 3), "args": {}})
        if kind == "inference":
            ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % u, "pid": 1, "tid": 1,
                       "ts": round(unit_start - 1, 3), "dur": round(end - unit_start + 2, 3), "args": {}})
        t = end + 50
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": FAKE_DEVICE["name"],
                                                       "numSms": FAKE_DEVICE["sms"]}],
            "traceEvents": ev}


def write_fake_trace(path, name, units, seed=0):
    with gzip.open(path, "wt") as f:
        json.dump(fake_trace(name, units, seed), f)
