#!/usr/bin/env python3
"""A long-running worker for e2e.sh: the harness's inference service or
trainer (worker.py's backends: workloads.py on a GPU, fake.py without one),
run until stopped, reporting what it does in a status file.

  e2e_worker.py --role inference --workload bert-infer --rate 50 --status FILE
  e2e_worker.py --role training --workload resnet50-train --status FILE [--fault-on FILE]

Every half second (and at the end) FILE is rewritten atomically with the
worker's pid and uid, the MPS environment it was started with (active-thread
percentage, pipe directory, lease id, restarts), the units done (requests or
iterations), the rate over the last seconds, recent latencies (inference),
its state (init, running, stopped, error) and any error. e2e.sh reads it to
tell the percentage that reached the client, the throughput, and whether a
worker survived a step.

SIGTERM or SIGINT ends the worker after the current unit (a trainer's clean
stop, as `colocd run` asks for on a throttle), exit status 0. A CUDA error
(an MPS client terminated through terminate_client, a fault) is recorded and
ends the worker with status 1.

With --fault-on FILE the trainer launches, once FILE exists, one
kernel that writes to an unmapped device address (an illegal address fault:
CUDA's driver API, PTX compiled by the driver), then synchronizes.

The fake backend stands in for the CUDA runtime's side of MPS through the
control program in $E2E_MPS_CONTROL (the project's fake
nvidia-cuda-mps-control): at start it connects as a client
(fake_client_connect <pid> <uid>), as a CUDA process does at its first CUDA
call; it sees terminate_client in server.log as a real client sees
CUDA_ERROR_MPS_CLIENT_TERMINATED; and its fault makes the daemon's server
report FAULT (the fake-fault file), as a fatal client fault does.
"""

import argparse
import collections
import os
import signal
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import core  # noqa: E402

# One kernel that stores to an unmapped address (PTX ISA 6.0, any sm_50+).
OOB_PTX = b"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry oob(.param .u64 p)
{
  .reg .u64 %rd<2>;
  .reg .u32 %r<2>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, 7;
  st.global.u32 [%rd1], %r1;
  ret;
}
"""
OOB_ADDRESS = 0x10  # the first page of the device's address space is never mapped


def cuda_oob_fault(out):
    """Launch the out-of-bounds kernel in the current (torch's primary)
    context and synchronize; out gets what the driver said at each call."""
    import ctypes
    import torch
    torch.cuda.synchronize()
    cu = ctypes.CDLL("libcuda.so.1")
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    out["cuModuleLoadData"] = cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(OOB_PTX + b"\0"))
    if out["cuModuleLoadData"] == 0:
        out["cuModuleGetFunction"] = cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"oob")
    if out.get("cuModuleGetFunction") != 0:
        # No PTX JIT here: an index out of bounds in torch's gather kernel
        # instead (a device-side assert, also fatal to the context).
        out["fallback"] = "index out of bounds (device-side assert)"
        x = torch.zeros(4, device="cuda")
        x[torch.tensor([1 << 20], device="cuda")] += 1
        torch.cuda.synchronize()
        return
    addr = ctypes.c_uint64(OOB_ADDRESS)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(addr), ctypes.c_void_p))
    out["cuLaunchKernel"] = cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, params, None)
    out["cuCtxSynchronize"] = cu.cuCtxSynchronize()


class FakeMPSClient(object):
    """The CUDA runtime's side of MPS for the fake backend (see the module
    doc): connect, notice a terminate_client, fault."""

    def __init__(self):
        self.control = os.environ.get("E2E_MPS_CONTROL", "nvidia-cuda-mps-control")
        self.pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
        # Where the daemon logs (a real client needs none; colocd run passes
        # only the lease's CUDA_MPS_* variables on).
        self.logs = os.environ.get("E2E_MPS_LOG_DIRECTORY") or os.environ.get("CUDA_MPS_LOG_DIRECTORY")
        self.connected = False
        self.log_pos = 0

    def connect(self, argv):
        if not self.pipe or not os.path.exists(os.path.join(self.pipe, "nvidia-cuda-mps-control.pid")):
            return "no MPS daemon in %s: runs without MPS" % self.pipe
        if os.getuid() != os.geteuid():
            return "setuid"
        line = "fake_client_connect %d %d %s\n" % (os.getpid(), os.getuid(), " ".join(os.path.basename(a) for a in argv[:2]))
        p = subprocess.run([self.control], input=line, capture_output=True, text=True, timeout=10)
        if p.returncode != 0 or p.stdout.strip():
            return "connect failed: %s%s" % (p.stdout, p.stderr)
        self.connected = True
        if self.logs:
            try:
                self.log_pos = os.path.getsize(os.path.join(self.logs, "server.log"))
            except OSError:
                self.log_pos = 0
        return None

    def check(self):
        """Raise as a CUDA call would once this client was terminated."""
        if not self.connected or not self.logs:
            return
        try:
            with open(os.path.join(self.logs, "server.log")) as f:
                f.seek(self.log_pos)
                text = f.read()
        except OSError:
            return
        if "Client {PID: %d," % os.getpid() in text and "terminated" in text:
            raise RuntimeError("CUDA_ERROR_MPS_CLIENT_TERMINATED (fake: terminate_client in server.log)")

    def fault(self):
        if self.pipe:
            open(os.path.join(self.pipe, "fake-fault"), "w").close()
        return {"fake": "fake-fault written: the server reports FAULT"}


def make_backend(args):
    ns = argparse.Namespace(precision=args.precision, device=args.device, scale=args.scale, seed=args.seed,
                            warmup_requests=5, warmup_iters=2)
    if args.backend == "fake":
        import fake
        os.environ["FAKE_MPS_ATTACH"] = "0"  # FakeMPSClient attaches, through the control program
        return fake.FakeBackend(ns)
    import worker
    return worker.TorchBackend(ns)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", choices=["inference", "training"], required=True)
    ap.add_argument("--backend", choices=["torch", "fake"], default="torch")
    ap.add_argument("--workload", required=True)
    ap.add_argument("--status", required=True)
    ap.add_argument("--rate", type=float, default=50.0, help="inference: requests per second (fixed interval)")
    ap.add_argument("--fault-on", default="", help="training: fault once this file exists")
    ap.add_argument("--linger-s", type=float, default=0.0,
                    help="after an error, stay alive this long (or until SIGTERM, or terminated) before exiting")
    ap.add_argument("--max-s", type=float, default=900.0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="tf32")
    ap.add_argument("--scale", default="full")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    stop = []

    def on_signal(signum, _frame):
        stop.append(signum)
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, on_signal)

    env = os.environ
    st = {"pid": os.getpid(), "uid": os.getuid(), "role": args.role, "workload": args.workload,
          "backend": args.backend, "pct": env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
          "pipe_dir": env.get("CUDA_MPS_PIPE_DIRECTORY"), "lease": env.get("COLOCD_LEASE_ID"),
          "restarts": env.get("COLOCD_RUN_RESTARTS"), "started": time.time(), "state": "init",
          "units": 0, "rate": 0.0, "errors": []}

    def write():
        st["t"] = time.time()
        core.write_json_atomic(args.status, st)

    write()
    client = FakeMPSClient() if args.backend == "fake" else None
    rc = 0
    try:
        if client is not None:
            note = client.connect(sys.argv)
            st["mps_client"] = note or "connected"
        backend = make_backend(args)
        t = time.monotonic()
        info = backend.init([args.workload])
        st["init_s"] = round(time.monotonic() - t, 3)
        st["device"] = info.get("env", {}).get("device_name") or info.get("env", {}).get("device")
        st["state"] = "running"
        st["running_since"] = time.time()
        write()
        recent = collections.deque()  # (monotonic end, latency ms)
        t0 = time.monotonic()
        next_write = t0
        next_arrival = t0
        faulted = False
        while not stop:
            now = time.monotonic()
            if now - t0 > args.max_s:
                break
            if args.role == "inference":
                if now < next_arrival:
                    time.sleep(min(next_arrival - now, 0.05))
                    if time.monotonic() < next_arrival:
                        continue
                start = next_arrival
                next_arrival = max(next_arrival + 1.0 / args.rate, time.monotonic() - 1.0)
            else:
                start = time.monotonic()
                if args.fault_on and not faulted and os.path.exists(args.fault_on):
                    faulted = True
                    st["fault"] = {"at_s": round(start - t0, 3)}
                    write()
                    if client is not None:
                        st["fault"].update(client.fault())
                        raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS (fake out-of-bounds kernel)")
                    st["fault"]["driver"] = {}
                    cuda_oob_fault(st["fault"]["driver"])
                    write()
            backend.step(args.workload)
            backend.sync(args.workload)
            end = time.monotonic()
            st["units"] += 1
            recent.append((end, (end - start) * 1e3))
            while recent and recent[0][0] < end - 3.0:
                recent.popleft()
            if end >= next_write:
                if client is not None:
                    client.check()
                span = end - recent[0][0] if len(recent) > 1 else 0
                st["rate"] = round((len(recent) - 1) / span, 3) if span > 0 else 0.0
                lat = sorted(x[1] for x in recent)
                if args.role == "inference" and lat:
                    st["latency_ms"] = {"p50": round(core.quantile_sorted(lat, 0.5), 3),
                                        "p99": round(core.quantile_sorted(lat, 0.99), 3), "n": len(lat)}
                write()
                next_write = end + 0.5
        st["state"] = "stopped"
        st["stopped_by"] = stop[0] if stop else "max_s"
    except Exception as e:  # a CUDA error: recorded, the worker ends
        traceback.print_exc()
        st["state"] = "error"
        st["errors"].append("%s: %s" % (type(e).__name__, e))
        rc = 1
    write()
    if rc and args.linger_s > 0:
        linger(args.linger_s, stop, client, st, write)
    return rc


def linger(seconds, stop, client, st, write):
    """Stay alive after an error, as a trainer that still holds its faulted
    context does, until SIGTERM, a terminate_client, or seconds."""
    end = time.monotonic() + seconds
    st["lingering"] = True
    write()
    while not stop and time.monotonic() < end:
        if client is not None:
            try:
                client.check()
            except RuntimeError as e:
                st["errors"].append("%s: %s" % (type(e).__name__, e))
                break
        time.sleep(0.2)
    st["lingering"] = False
    st["lingered_until"] = "sigterm" if stop else ("timeout" if time.monotonic() >= end else "terminated")
    write()


if __name__ == "__main__":
    sys.exit(main())
