#!/usr/bin/env python3
"""A worker process: holds its workloads on the GPU and runs what the
controller (measure.py) asks, one JSON command per line on stdin, one JSON
reply per line on stdout (stray prints of libraries go to stderr).

Commands: init, solo, profile, serve, train (then stop), traced, quit. The
serve, train and traced loops are shared by both backends: "torch"
(workloads.py on a GPU, or on the CPU with --device cpu) and "fake" (fake.py:
sleeps, no GPU), so the fake backend exercises the same timing code on a
machine without a GPU.

The worker ignores SIGINT and SIGTERM: under MPS a client killed by a signal
can wedge the server, so it ends when told to quit or when its stdin closes.
"""

import argparse
import gzip
import json
import os
import shutil
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import core  # noqa: E402


def sleep_until(t_ns, spin_ns=1500000):
    """Sleep until monotonic time t_ns, spinning for the last spin_ns."""
    while True:
        d = t_ns - time.monotonic_ns()
        if d <= 0:
            return
        if d > spin_ns:
            time.sleep((d - spin_ns) / 1e9)


class TorchBackend(object):
    def __init__(self, args):
        self.args = args
        self.w = {}

    def init(self, names):
        import workloads
        workloads.configure(self.args.precision, self.args.device)
        out = {"workloads": {}}
        for n in names:
            t = time.monotonic()
            w = workloads.make(n, device=self.args.device, precision=self.args.precision,
                               scale=self.args.scale, seed=self.args.seed).build()
            self.w[n] = w
            warm = self.args.warmup_requests if w.kind == "inference" else self.args.warmup_iters
            for _ in range(warm):
                w.step()
            w.sync()
            info = w.info()
            info["init_s"] = round(time.monotonic() - t, 3)
            out["workloads"][n] = info
        out["env"] = workloads.torch_env(self.args.device)
        return out

    def step(self, name):
        self.w[name].step()

    def sync(self, name):
        self.w[name].sync()

    def kind(self, name):
        return self.w[name].kind

    def begin_train(self, name):
        pass

    def end_train(self, name):
        pass

    def profile(self, name, path, steps):
        """A Kineto trace of `steps` units after one wait and one warm-up step:
        each inference request inside record_function("request"), each
        training iteration a ProfilerStep (prof.step())."""
        from torch.profiler import ProfilerActivity, profile, record_function, schedule
        import torch
        w = self.w[name]
        acts = [ProfilerActivity.CPU]
        if self.args.device != "cpu" and torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        raw = path[:-3] if path.endswith(".gz") else path + ".raw.json"
        done = []

        def ready(p):
            p.export_chrome_trace(raw)
            done.append(raw)
        with profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=steps, repeat=1),
                     on_trace_ready=ready, record_shapes=False, with_stack=False) as prof:
            for _ in range(steps + 2):
                if w.kind == "inference":
                    with record_function("request"):
                        w.step()
                        w.sync()
                else:
                    w.step()
                    w.sync()
                prof.step()
        if not done:
            prof.export_chrome_trace(raw)
        gzip_trace(raw, path)
        os.unlink(raw)


    def start_trace(self, name):
        """Start torch.profiler with no schedule: everything until stop_trace."""
        from torch.profiler import ProfilerActivity, profile
        import torch
        acts = [ProfilerActivity.CPU]
        if self.args.device != "cpu" and torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        self._prof = profile(activities=acts, record_shapes=False, with_stack=False)
        self._prof.start()

    def mark(self, label):
        from torch.profiler import record_function
        return core.clock_mark(label, lambda: record_function(label))

    def stop_trace(self, name, path, clock):
        """Stop, export, and keep what the share analysis reads
        (core.slim_trace), with the clock marks, gzipped at path."""
        prof, self._prof = self._prof, None
        prof.stop()
        raw = path[:-3] if path.endswith(".gz") else path + ".raw.json"
        prof.export_chrome_trace(raw)
        with open(raw) as f:
            doc = json.load(f)
        os.unlink(raw)
        core.write_trace(path, core.slim_trace(doc), clock)


def gzip_trace(src_path, dst_path):
    """gzip a Chrome trace; a bare JSON array of events (the legacy
    profiler's export, as from a torch built without Kineto) is wrapped as
    {"traceEvents": [...]}, the object colocd's importer reads."""
    with open(src_path, "rb") as src, gzip.open(dst_path, "wb", compresslevel=6) as dst:
        head = src.read(4096)
        wrap = head.lstrip()[:1] == b"["
        if wrap:
            dst.write(b'{"traceEvents": ')
        dst.write(head)
        shutil.copyfileobj(src, dst)
        if wrap:
            dst.write(b"}")


def serve(backend, name, offsets, lead_s, t0_ns=None):
    """Serve one request per arrival offset (s) from t0 = now + lead_s (or
    t0_ns), FIFO: a request starts at max(its arrival, the previous
    completion). Returns ns times relative to t0 and t0 itself (monotonic ns)."""
    t0 = time.monotonic_ns() + int(lead_s * 1e9) if t0_ns is None else int(t0_ns)
    arr, st, en = [], [], []
    for off in offsets:
        a = t0 + int(round(off * 1e9))
        sleep_until(a)
        s = time.monotonic_ns()
        backend.step(name)
        backend.sync(name)
        e = time.monotonic_ns()
        arr.append(a - t0)
        st.append(s - t0)
        en.append(e - t0)
    return {"t0": t0, "arrivals": arr, "starts": st, "ends": en}


def solo(backend, name, n):
    """n back-to-back units (requests or iterations), each timed alone."""
    ds = []
    for _ in range(n):
        s = time.monotonic_ns()
        backend.step(name)
        backend.sync(name)
        ds.append((time.monotonic_ns() - s) / 1e6)
    return ds


def train(backend, name, warm, max_s, reader, send):
    """Run iterations until a stop command (or EOF, or max_s): after `warm`
    iterations send {"event": "running"}; reply with every iteration's
    (start, end) in monotonic ns."""
    backend.begin_train(name)
    try:
        for _ in range(warm):
            backend.step(name)
            backend.sync(name)
        send({"event": "running", "t": time.monotonic_ns()})
        iters, why = [], "max_s"
        end = time.monotonic() + max_s
        while True:
            s = time.monotonic_ns()
            backend.step(name)
            backend.sync(name)
            iters.append([s, time.monotonic_ns()])
            try:
                line = reader.poll()
            except EOFError:
                why = "eof"
                break
            if line is not None:
                msg = core.decode(line)
                if msg.get("cmd") == "stop":
                    why = "stop"
                    break
                send({"ok": False, "error": "unexpected command during train: %r" % msg.get("cmd")})
            if time.monotonic() > end:
                break
        return {"ok": True, "iters": iters, "stopped": why}
    finally:
        backend.end_train(name)


def traced(backend, name, path, t0_ns, window_s, lead_s, offsets=None):
    """One side of a window traced from both sides: the profiler starts
    lead_s before t0_ns (monotonic ns, the controller's choice for both
    processes) and stops after the window, with a clock mark at each end.
    A trainer (offsets None) iterates from the command on, through the
    window; an inference service serves offsets from t0_ns. The trace goes
    to path with the marks and the window (core.TRACE_CLOCK_KEY)."""
    start = int(t0_ns) - int(lead_s * 1e9)
    end = int(t0_ns) + int(window_s * 1e9)
    if offsets is None:
        backend.begin_train(name)
    try:
        return _traced(backend, name, path, int(t0_ns), start, end, offsets)
    finally:
        if offsets is None:
            backend.end_train(name)


def _traced(backend, name, path, t0_ns, start, end, offsets):
    warm = 0
    while offsets is None and time.monotonic_ns() < start:
        backend.step(name)
        backend.sync(name)
        warm += 1
    sleep_until(start)
    backend.start_trace(name)
    clock = {"marks": [backend.mark(core.CLOCK_MARKS[0])], "t0_monotonic_ns": t0_ns,
             "window_ns": end - t0_ns, "workload": name, "pid": os.getpid()}
    try:
        if offsets is None:
            iters = []
            while time.monotonic_ns() < end:
                s = time.monotonic_ns()
                backend.step(name)
                backend.sync(name)
                iters.append([s, time.monotonic_ns()])
            res = {"iters": iters, "warm_iters": warm}
        else:
            res = serve(backend, name, offsets, 0, t0_ns=t0_ns)
        clock["marks"].append(backend.mark(core.CLOCK_MARKS[1]))
    finally:
        backend.stop_trace(name, path, clock)
    res.update({"path": path, "bytes": os.path.getsize(path), "clock": clock})
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["torch", "fake"], default="torch")
    ap.add_argument("--role", choices=["inference", "training"], required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="tf32")
    ap.add_argument("--scale", default="full")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup-requests", type=int, default=20)
    ap.add_argument("--warmup-iters", type=int, default=3)
    args = ap.parse_args(argv)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    proto = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    reader = core.LineReader(0)

    def send(msg):
        proto.write(core.encode(msg))

    if args.backend == "fake":
        import fake
        backend = fake.FakeBackend(args)
    else:
        backend = TorchBackend(args)

    while True:
        try:
            line = reader.readline(None)
        except EOFError:
            return 0
        try:
            msg = core.decode(line)
            cmd = msg.get("cmd")
            t = time.monotonic()
            if cmd == "quit":
                send({"ok": True})
                return 0
            elif cmd == "init":
                reply = backend.init(msg["workloads"])
                reply["pid"] = os.getpid()
            elif cmd == "solo":
                reply = {"ms": solo(backend, msg["workload"], int(msg["n"]))}
            elif cmd == "serve":
                reply = serve(backend, msg["workload"], msg["offsets"], float(msg.get("lead_s", 0.05)))
            elif cmd == "profile":
                backend.profile(msg["workload"], msg["path"], int(msg["steps"]))
                reply = {"path": msg["path"], "bytes": os.path.getsize(msg["path"])}
            elif cmd == "train":
                reply = train(backend, msg["workload"], int(msg.get("warm", 3)), float(msg.get("max_s", 600)),
                              reader, send)
            elif cmd == "traced":
                reply = traced(backend, msg["workload"], msg["path"], int(msg["t0_ns"]), float(msg["window_s"]),
                               float(msg["lead_s"]), msg.get("offsets"))
            elif cmd == "stop":
                reply = {"ok": False, "error": "stop: not training"}
            else:
                raise ValueError("unknown command %r" % cmd)
            reply.setdefault("ok", True)
            reply["seconds"] = round(time.monotonic() - t, 3)
        except Exception as e:  # reported to the controller, which decides
            traceback.print_exc()
            reply = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        send(reply)


if __name__ == "__main__":
    sys.exit(main())
