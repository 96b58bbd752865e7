#!/usr/bin/env python3
"""Measure real co-location on one GPU and write colocd's inputs.

For each workload alone: a torch.profiler (Kineto) trace of one request or
training step, imported with `colocd profile import`; solo service and
latency percentiles and the solo iteration time. Then two processes on the
GPU, an inference worker and a training worker: time-slicing (no MPS daemon)
and MPS (a daemon of our own; trainers at each active-thread percentage,
inference at 100). Each window serves a fixed number of requests at Poisson
arrivals and records latency (arrival -> completion), service (start ->
completion) and the trainer's iteration time. Output, all under --out:

  measurements.json   colocd.measurements/v1, the input of colocd calibrate
  profiles/*.json     colocd.profile/v1, imported from traces/*.json.gz
  traces/*.json.gz    the Kineto traces
  timeslice_shares.json  (--ts-traces) colocd.timeslice-shares/v1: per
                      inference x training pair, the GPU share each process
                      got while both had work, read from both processes'
                      Kineto traces (traces/timeslice-pairs/) over one window
  mps_spin_sweep.json (--spin-sweep) colocd.mps-spin-sweep/v1: spin trainers
                      of fixed block time and varied memory traffic (and the
                      other way round) beside one service under MPS, with
                      the slowdowns; their windows are records too
  run.json            everything: environment, plan, solo figures, every
                      window, MPS start/attach/quit output, errors, timings
  raw.jsonl           per-request times of every window (one line each)
  summary.txt         a table to read
  logs/, mps-log/     worker stderr, the daemon's control.log and server.log

A global deadline (--budget-s) stops early and still writes what it has;
files are rewritten after every window. The GPU's settings are never
changed. --backend fake runs the same orchestration with no GPU (sleeps and
synthetic traces; output marked SYNTHETIC); --plan prints the budget.
See docs/accuracy.md.
"""

import argparse
import datetime
import gzip
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import core  # noqa: E402
import mpsctl  # noqa: E402
import workloads  # noqa: E402  (imports no torch)


class Terminated(Exception):
    pass


class WorkerError(Exception):
    pass


class Worker(object):
    """A worker process (worker.py) and its line protocol."""

    def __init__(self, label, argv, env, log_path):
        self.label = label
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, close_fds=True)
        self.reader = core.LineReader(self.proc.stdout.fileno())
        self.pid = self.proc.pid

    def send(self, msg):
        self.proc.stdin.write(core.encode(msg))
        self.proc.stdin.flush()

    def recv(self, timeout):
        line = self.reader.readline(timeout)
        if line is None:
            raise WorkerError("%s: no answer in %.0f s" % (self.label, timeout))
        return core.decode(line)

    def call(self, msg, timeout):
        self.send(msg)
        return self.reply(timeout)

    def reply(self, timeout):
        try:
            r = self.recv(timeout)
        except EOFError:
            raise WorkerError("%s: exited (rc %s); see its log" % (self.label, self.proc.poll()))
        if not r.get("ok"):
            raise WorkerError("%s: %s" % (self.label, r.get("error")))
        return r

    def drain(self, quiet_s):
        """Read and drop replies until none comes for quiet_s: after a
        failure, the answer to a later command must not be taken for the
        answer to an earlier one."""
        dropped = []
        while True:
            try:
                line = self.reader.readline(quiet_s)
            except EOFError:
                break
            if line is None:
                break
            dropped.append(line)
        return dropped

    def close(self, timeout=20.0, daemon=None):
        """quit, then (if it does not exit) terminate_client under MPS, then kill."""
        out = {"label": self.label, "pid": self.pid}
        if self.proc.poll() is None:
            try:
                self.send({"cmd": "quit"})
                self.proc.stdin.close()
            except (OSError, ValueError):
                pass
            try:
                out["rc"] = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                if daemon is not None and daemon.started:
                    out["terminate_client"] = daemon.terminate_client(self.pid)
                    try:
                        out["rc"] = self.proc.wait(5)
                    except subprocess.TimeoutExpired:
                        pass
                if self.proc.poll() is None:
                    self.proc.kill()
                    out["killed"] = True
                    out["rc"] = self.proc.wait(10)
        else:
            out["rc"] = self.proc.returncode
        self.log.close()
        return out


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_list(s, conv=str):
    return [conv(x) for x in s.split(",") if x.strip()] if s else []


class Runner(object):
    def __init__(self, args, cfg):
        self.args, self.cfg = args, cfg
        self.out = os.path.abspath(args.out)
        self.t_start = time.monotonic()
        self.deadline = self.t_start + cfg.budget_s
        self.state = {"format": "colocd-gpu-harness.run/v1", "started": utcnow(), "backend": args.backend,
                      "config": cfg.as_dict(), "argv": sys.argv, "env": {}, "phases": [], "workloads": {},
                      "solo": {}, "mps_solo": {}, "windows": [], "skipped": [], "errors": [],
                      "profiles": {}, "mps": {"status": "not run"}, "precision": args.precision,
                      "trace_pairs": []}
        if cfg.spin_sweep:
            self.state["spin_sweep"] = {"status": "not run", "why": "MPS did not run"}
        self.workers = []
        self.daemon = None
        self.imports = {}
        self._phase = None
        for d in ("traces", "profiles", "logs"):
            os.makedirs(os.path.join(self.out, d), exist_ok=True)
        self.raw = open(os.path.join(self.out, "raw.jsonl"), "a")

    # -- bookkeeping -------------------------------------------------------

    def left(self):
        return self.deadline - time.monotonic()

    def phase(self, name):
        now = time.monotonic()
        if self._phase is not None:
            self._phase["seconds"] = round(now - self._phase["t"], 2)
            del self._phase["t"]
        if name is None:
            self._phase = None
            return
        self._phase = {"phase": name, "at_s": round(now - self.t_start, 2), "t": now}
        self.state["phases"].append(self._phase)
        log("== %s (%.0f s left)" % (name, self.left()))
        self.save()

    def error(self, where, e):
        msg = "%s: %s: %s" % (where, type(e).__name__, e)
        log("ERROR " + msg)
        self.state["errors"].append({"where": where, "error": "%s: %s" % (type(e).__name__, e),
                                     "at_s": round(time.monotonic() - self.t_start, 2)})

    def save(self):
        st = dict(self.state)
        st["phases"] = [{k: v for k, v in p.items() if k != "t"} for p in self.state["phases"]]
        self.state["elapsed_s"] = st["elapsed_s"] = round(time.monotonic() - self.t_start, 2)
        core.write_json_atomic(os.path.join(self.out, "run.json"), st)
        self.write_measurements()

    # -- workers -----------------------------------------------------------

    def spawn(self, label, role, env):
        a = self.args
        argv = [a.python, os.path.join(HERE, "worker.py"), "--backend", a.backend, "--role", role,
                "--device", a.device, "--precision", a.precision, "--scale", a.scale, "--seed", str(a.seed),
                "--warmup-requests", str(self.cfg.warmup_requests), "--warmup-iters", str(self.cfg.warmup_train_iters)]
        if a.backend == "fake":
            env = dict(env)
            env["FAKE_GPU_DIR"] = os.path.join(self.out, "fake-gpu")
            os.makedirs(env["FAKE_GPU_DIR"], exist_ok=True)
        w = Worker(label, argv, env, os.path.join(self.out, "logs", label + ".log"))
        self.workers.append(w)
        return w

    def init_all(self, pairs, timeout_s=None):
        """Send init to every (worker, workloads) at once, then collect: the
        workers import torch and build their models in parallel."""
        for w, names in pairs:
            w.send({"cmd": "init", "workloads": names})
        res = {}
        end = time.monotonic() + max(60.0, min(timeout_s or self.args.init_timeout_s, self.left() + 30))
        for w, names in pairs:
            r = w.reply(max(1.0, end - time.monotonic()))
            res[w.label] = r
            for n, info in r["workloads"].items():
                self.state["workloads"].setdefault(n, {}).update({"info": info})
            if r.get("env"):
                self.state["env"].setdefault("worker", r["env"])
        return res

    def close_workers(self):
        out = []
        for w in self.workers:
            try:
                out.append(w.close(daemon=self.daemon))
            except Exception as e:  # keep closing the others
                self.error("close %s" % w.label, e)
        self.workers = []
        self.state.setdefault("closed_workers", []).extend(out)

    # -- environment -------------------------------------------------------

    def probe(self):
        env = self.state["env"]
        env.update({"python": platform.python_version(), "kernel": platform.release(),
                    "platform": platform.platform(), "host_cpus": os.cpu_count()})
        if self.args.backend != "torch":
            env["gpu"] = None
            return
        try:
            r = subprocess.run(core.smi_query_argv(), capture_output=True, text=True, timeout=30)
            env["nvidia_smi_query"] = r.stdout
            gpus = core.parse_smi_query(r.stdout)
            if gpus:
                env["gpu"] = gpus[0]
                env["driver_version"] = gpus[0].get("driver_version")
            r2 = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30)
            env["driver_cuda"] = core.parse_smi_cuda_version(r2.stdout)
            with open(os.path.join(self.out, "logs", "nvidia-smi.txt"), "w") as f:
                f.write(r2.stdout + r2.stderr)
        except Exception as e:
            self.error("nvidia-smi", e)

    # -- phases ------------------------------------------------------------

    def run(self):
        cfg, a = self.cfg, self.args
        self.probe()
        mode = (self.state["env"].get("gpu") or {}).get("compute_mode")
        allowed = core.sharing_allowed(mode)
        if allowed["timeslice"] is not None:
            # Solo runs and time-slicing need two plain processes on the GPU;
            # the harness never changes the compute mode to get them.
            raise RuntimeError("GPU compute mode %s: the harness needs Default (%s)" % (mode, allowed["timeslice"]))
        if a.no_timeslice:
            allowed["timeslice"] = "--no-timeslice"
        if a.no_mps:
            allowed["mps"] = "--no-mps"
        self.state["sharing"] = allowed
        self.state["plan"] = core.plan_windows(cfg, mps=allowed["mps"] is None)

        self.phase("start workers (plain, time-slicing)")
        base = core.plain_env(os.environ, a.gpu)
        inf = self.spawn("ts-inference", "inference", base)
        trn = self.spawn("ts-training", "training", base)
        self.init_all([(inf, cfg.inference), (trn, cfg.training)])

        self.phase("profiles")
        for w, names, kind in ((inf, cfg.inference, "inference"), (trn, cfg.training, "training")):
            for n in names:
                self.profile(w, n, kind)

        self.phase("solo")
        self.solo(inf, trn)

        groups = [g for g in self.state["plan"] if g["mode"] == "timeslice"] if allowed["timeslice"] is None else []
        mps_groups = [g for g in self.state["plan"] if g["mode"] == "mps"]
        # What must still fit after the time-slicing windows.
        reserve = cfg.est_teardown_s
        if mps_groups:
            reserve += cfg.est_mps_start_s + cfg.est_init_s + self.mps_solo_estimate()
            reserve += core.spin_sweep_estimate(cfg, workloads.guesses())
        if groups:
            self.phase("time-slicing windows")
            free = self.left() - reserve - core.trace_pairs_estimate(cfg)
            free -= (len(groups) + len(mps_groups)) * cfg.est_group_overhead_s
            win_s, tight, cost = core.fit_windows(free, core.window_items(groups + mps_groups, *self.rates(), cfg=cfg), cfg)
            self.state["timeslice_window_s"] = {"seconds": round(win_s, 2), "tight": tight,
                                                "planned_s": round(cost, 1), "free_s": round(free, 1)}
            for g in groups:
                self.run_group(g, inf, trn, win_s)
        else:
            self.state["skipped"].append({"what": "time-slicing", "why": allowed["timeslice"]})
        if cfg.ts_traces:
            self.phase("time slicing traced from both sides")
            self.trace_pairs(inf, trn, reserve)
        self.close_workers()

        if mps_groups:
            self.phase("MPS")
            self.run_mps(mps_groups, base)
        else:
            self.state["mps"] = {"status": "not run", "why": allowed["mps"]}
            if cfg.spin_sweep:
                self.state["spin_sweep"]["why"] = "no MPS: %s" % allowed["mps"]

    def profile(self, w, name, kind):
        if self.left() < self.cfg.est_teardown_s:
            self.state["skipped"].append({"what": "profile " + name, "why": "deadline"})
            return
        path = os.path.join(self.out, core.trace_relpath(name))
        steps = self.cfg.profile_requests if kind == "inference" else self.cfg.profile_train_steps
        try:
            r = w.call({"cmd": "profile", "workload": name, "path": path, "steps": steps}, 300)
            self.state["workloads"].setdefault(name, {})["trace"] = {"path": core.trace_relpath(name),
                                                                       "bytes": r["bytes"], "seconds": r["seconds"]}
            self.start_import(name, kind)
        except WorkerError as e:
            self.error("profile " + name, e)

    def start_import(self, name, kind):
        """colocd profile import, in the background (CPU only)."""
        colocd = self.args.colocd
        if not colocd or not (os.path.exists(colocd) or shutil.which(colocd)):
            self.state["profiles"][name] = {"ok": False, "error": "colocd binary not found: %r (rerun with --finalize-only)" % colocd}
            return
        argv = core.import_argv(colocd, os.path.join(self.out, core.trace_relpath(name)),
                                os.path.join(self.out, core.profile_relpath(name)), name, kind)
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.imports[name] = (argv, p)

    def collect_imports(self):
        for name, (argv, p) in list(self.imports.items()):
            try:
                so, se = p.communicate(timeout=120)
                ok = p.returncode == 0
            except subprocess.TimeoutExpired:
                p.kill()
                so, se = p.communicate()
                ok = False
            self.state["profiles"][name] = {"ok": ok, "argv": argv, "rc": p.returncode, "stdout": so, "stderr": se}
            if ok:
                self.state["profiles"][name]["path"] = core.profile_relpath(name)
            del self.imports[name]

    def solo(self, inf, trn):
        cfg = self.cfg
        loads = sorted(set(cfg.timeslice_loads + ([cfg.mps_load] if self.state["sharing"]["mps"] is None else [])))
        for n in cfg.training:
            try:
                r = trn.call({"cmd": "solo", "workload": n, "n": cfg.solo_train_iters}, 600)
                self.state["solo"][n] = {"iteration_ms": core.summarize(r["ms"]), "n": len(r["ms"])}
            except WorkerError as e:
                self.error("solo " + n, e)
        for n in cfg.inference:
            try:
                r = inf.call({"cmd": "solo", "workload": n, "n": cfg.solo_backtoback}, 300)
                s = {"service_backtoback_ms": core.summarize(r["ms"]), "n_backtoback": len(r["ms"]), "rates": {}}
                self.state["solo"][n] = s
                for load in loads:
                    rate = core.rate_for(load, s["service_backtoback_ms"]["mean"])
                    s["rates"][core.load_key(load)] = rate
                    if self.left() < cfg.solo_requests / rate + cfg.est_teardown_s + 5:
                        self.state["skipped"].append({"what": "solo %s at load %s" % (n, load), "why": "deadline"})
                        continue
                    res = self.serve(inf, n, rate, cfg.solo_requests, "solo", load)
                    s.setdefault("at_load", {})[core.load_key(load)] = res
            except (WorkerError, ValueError) as e:
                self.error("solo " + n, e)
        self.save()

    def rates(self):
        """((inference, load key) -> req/s, training -> solo iteration ms)."""
        rates, its = {}, {}
        for n, s in self.state["solo"].items():
            for k, r in (s.get("rates") or {}).items():
                rates[(n, k)] = r
            if (s.get("iteration_ms") or {}).get("mean"):
                its[n] = s["iteration_ms"]["mean"]
        return rates, its

    def mps_solo_estimate(self):
        t = 0.0
        for n in self.cfg.training:
            it = ((self.state["solo"].get(n) or {}).get("iteration_ms") or {}).get("mean")
            it = it or workloads.SPECS[n]["guess_ms"]
            t += sum(self.cfg.mps_solo_train_iters * it * 100.0 / p for p in self.cfg.mps_pcts) / 1e3
        return t

    def serve(self, inf, name, rate, n, tag, load, seed=None):
        seed = self.cfg.seed if seed is None else seed
        offsets = core.poisson_offsets(rate, n, seed)
        expect = offsets[-1] if offsets else 0
        r = inf.call({"cmd": "serve", "workload": name, "offsets": offsets, "lead_s": 0.05},
                     max(60.0, 4 * expect + 30))
        lat, svc = core.request_times(r["arrivals"], r["starts"], r["ends"])
        self.raw.write(json.dumps({"tag": tag, "inference": name, "load": load, "rate_rps": rate, "seed": seed,
                                   "t0": r["t0"], "arrivals_ns": r["arrivals"], "starts_ns": r["starts"],
                                   "ends_ns": r["ends"]}) + "\n")
        self.raw.flush()
        return {"rate_rps": rate, "requests": n, "seed": seed, "latency_ms": core.summarize(lat),
                "service_ms": core.summarize(svc), "t0": r["t0"], "t_end": r["t0"] + r["ends"][-1],
                "wall_s": round(r["ends"][-1] / 1e9, 3),
                "achieved_rps": round(n / (r["arrivals"][-1] / 1e9), 2) if n > 1 and r["arrivals"][-1] > 0 else None}

    def rate_at(self, iname, load):
        """iname's request rate at load: the solo phase's, else from its solo
        service time; None without one."""
        solo = self.state["solo"].get(iname) or {}
        rate = (solo.get("rates") or {}).get(core.load_key(load))
        if rate:
            return rate
        svc = (solo.get("service_backtoback_ms") or {}).get("mean")
        return core.rate_for(load, svc) if svc else None

    def run_group(self, g, inf, trn, win_s, requests=None, seed=None, into=None):
        """One trainer runs g's training workload while inf serves each window
        (of window_s, or of `requests` requests at arrival `seed`); the
        finished windows go to into (default: the records' windows)."""
        cfg = self.cfg
        tname = g["training"]
        solo_it = ((self.state["solo"].get(tname) or {}).get("iteration_ms") or {}).get("mean")
        done = []
        try:
            trn.send({"cmd": "train", "workload": tname, "warm": cfg.warmup_train_iters,
                      "max_s": max(30.0, self.left() + 30)})
            ev = trn.recv(max(60.0, 20 * (solo_it or 1000) / 1e3 * cfg.slowdown_guess))
            if ev.get("event") != "running":
                raise WorkerError("trainer %s: %s" % (tname, ev.get("error", ev)))
        except (WorkerError, EOFError) as e:
            self.error("start trainer %s (%s %s)" % (tname, g["mode"], g["pct"]), e)
            return
        try:
            for wdef in g["windows"]:
                iname, load = wdef["inference"], wdef["load"]
                rate = self.rate_at(iname, load)
                if not rate:
                    self.state["skipped"].append({"what": core.record_name(iname, tname, g["mode"], load, g["pct"]),
                                                  "why": "no solo service time"})
                    continue
                n = requests or core.requests_for(win_s, rate, cfg,
                                                  core.colocated_iter_ms(solo_it, g["mode"], g["pct"], cfg))
                expect = n / rate + cfg.est_window_overhead_s
                if self.left() < expect + cfg.est_teardown_s:
                    self.state["skipped"].append({"what": core.record_name(iname, tname, g["mode"], load, g["pct"]),
                                                  "why": "deadline"})
                    continue
                idx = len(self.state["windows"]) + len(done)
                try:
                    res = self.serve(inf, iname, rate, n, core.record_name(iname, tname, g["mode"], load, g["pct"]),
                                     load, seed=cfg.seed * 1000 + idx if seed is None else seed)
                except (WorkerError, ValueError) as e:
                    self.error("window %s+%s" % (iname, tname), e)
                    continue
                res.update({"mode": g["mode"], "pct": g["pct"], "inference": iname, "training": tname, "load": load,
                            "name": core.record_name(iname, tname, g["mode"], load, g["pct"])})
                done.append(res)
                log("   %-45s %4d req @ %7.1f rps  latency mean %8.3f p99 %8.3f ms" % (
                    res["name"], n, rate, res["latency_ms"].get("mean", 0), res["latency_ms"].get("p99", 0)))
        finally:
            try:
                trn.send({"cmd": "stop"})
                r = trn.reply(max(60.0, 10 * (solo_it or 1000) / 1e3 * 4))
                iters = r["iters"]
            except (WorkerError, OSError) as e:
                self.error("stop trainer %s" % tname, e)
                iters = []
                trn.drain(2.0)
        for res in done:
            if not core.trainer_covers(iters, res["t0"], res["t_end"]):
                # The trainer failed or stopped during the window: its
                # latency is not a co-located one. Kept aside, not a record.
                res["invalid"] = "the trainer was not running for the whole window"
                self.state.setdefault("invalid_windows", []).append(res)
                continue
            its, partial = core.iterations_in_window(iters, res["t0"], res["t_end"])
            res["training_iterations"] = len(its)
            res["training_iteration_partial"] = partial
            if its and not partial:
                res["training_iteration_ms"] = core.mean(its)
                res["training_iteration_summary_ms"] = core.summarize(its)
            if solo_it and res.get("training_iteration_ms"):
                res["training_slowdown"] = round(res["training_iteration_ms"] / solo_it, 4)
            (self.state["windows"] if into is None else into).append(res)
        self.save()

    def run_mps(self, groups, base):
        cfg, a = self.cfg, self.args
        need = cfg.est_mps_start_s + cfg.est_init_s + cfg.est_teardown_s + cfg.min_window_s * len(cfg.inference)
        if self.left() < need:
            self.state["mps"] = {"status": "not run", "why": "deadline: %.0f s left, %.0f s needed" % (self.left(), need)}
            return
        pipe = a.mps_pipe_dir or tempfile.mkdtemp(prefix="colocd-mps-")
        logd = os.path.join(self.out, "mps-log")
        self.daemon = mpsctl.Daemon(a.mps_control, pipe, logd, base_env=base, visible=a.gpu)
        st = self.state["mps"] = {"status": "starting", "pipe_dir": self.daemon.pipe_dir, "log_dir": "mps-log"}
        r = self.daemon.start()
        st["start"] = r
        if not r["ok"]:
            st["status"] = "failed to start"
            log("MPS did not start: rc %s\n%s%s" % (r.get("rc"), r.get("stdout", ""), r.get("stderr", "")))
            self.save()
            return
        pcts = sorted(set(g["pct"] for g in groups), reverse=True)
        try:
            inf = self.spawn("mps-inference", "inference", self.daemon.client_env(100))
            trns = {p: self.spawn("mps-training-%g" % p, "training", self.daemon.client_env(p)) for p in pcts}
            # A client that cannot reach its MPS server can hang in CUDA
            # initialisation: a shorter limit than the plain workers get.
            self.init_all([(inf, cfg.inference)] + [(trns[p], cfg.training) for p in pcts],
                          timeout_s=min(self.args.init_timeout_s, 150.0))
        except WorkerError as e:
            self.error("MPS clients", e)
            st["status"] = "clients failed"
            st["control_log"] = self.daemon.log_tail()
            return
        ok, ev, rows = self.daemon.attachment([w.pid for w in self.workers])
        st["attachment"] = ev
        if not ok:
            st["status"] = "clients not attached"
            log("MPS: the workers are not MPS clients (%s); no MPS data" % ev["missing"])
            self.save()
            return
        st["status"] = "running"
        self.phase("MPS solo")
        try:
            self.mps_solo(inf, trns)
        except WorkerError as e:
            self.error("MPS solo", e)
        self.phase("MPS windows")
        free = self.left() - cfg.est_teardown_s - len(groups) * cfg.est_group_overhead_s
        free -= core.spin_sweep_estimate(cfg, workloads.guesses())
        win_s, tight, cost = core.fit_windows(free, core.window_items(groups, *self.rates(), cfg=cfg), cfg)
        self.state["mps_window_s"] = {"seconds": round(win_s, 2), "tight": tight, "planned_s": round(cost, 1),
                                      "free_s": round(free, 1)}
        for g in groups:
            self.run_group(g, inf, trns[g["pct"]], win_s)
        if cfg.spin_sweep:
            self.phase("MPS spin sweep")
            try:
                self.spin_sweep(inf, trns)
            except (WorkerError, ValueError) as e:
                self.error("MPS spin sweep", e)
                self.state["spin_sweep"]["status"] = "failed"
        st["status"] = "done"

    def mps_solo(self, inf, trns):
        cfg = self.cfg
        for n in cfg.inference:
            rate = ((self.state["solo"].get(n) or {}).get("rates") or {}).get(core.load_key(cfg.mps_load))
            if rate and self.left() > cfg.solo_requests / rate + cfg.est_teardown_s + 5:
                self.state["mps_solo"][n] = self.serve(inf, n, rate, cfg.solo_requests, "mps-solo", cfg.mps_load)
        for p, w in trns.items():
            for n in cfg.training:
                it = ((self.state["solo"].get(n) or {}).get("iteration_ms") or {}).get("mean") or 1000.0
                if self.left() < cfg.mps_solo_train_iters * it * 100.0 / p / 1e3 + cfg.est_teardown_s + 5:
                    self.state["skipped"].append({"what": "MPS solo %s at %g %%" % (n, p), "why": "deadline"})
                    continue
                r = w.call({"cmd": "solo", "workload": n, "n": cfg.mps_solo_train_iters}, 300)
                self.state["mps_solo"]["%s@%g" % (n, p)] = {"iteration_ms": core.summarize(r["ms"]), "pct": p}
        self.save()

    # -- time slicing from both sides ---------------------------------------

    def trace_pairs(self, inf, trn, reserve):
        """Every inference x training pair traced from both sides over one
        window, while reserve seconds must still be left afterwards."""
        cfg = self.cfg
        os.makedirs(os.path.join(self.out, "traces", "timeslice-pairs"), exist_ok=True)
        per = cfg.trace_lead_s + cfg.trace_window_s + cfg.est_trace_pair_s
        for iname, tname in core.trace_pairs(cfg):
            name = core.pair_name(iname, tname, cfg.trace_load)
            rate = self.rate_at(iname, cfg.trace_load)
            if not rate:
                self.state["skipped"].append({"what": name, "why": "no solo service time"})
                continue
            if self.left() < per + reserve:
                self.state["skipped"].append({"what": name, "why": "deadline"})
                continue
            try:
                rec = self.trace_pair(inf, trn, iname, tname, rate)
            except (WorkerError, ValueError, OSError) as e:
                self.error("traced " + name, e)
                continue
            self.state["trace_pairs"].append(rec)
            sh = rec.get("shares") or {}
            log("   %-45s both busy %7.1f ms: inference %s, training %s, %s switches" % (
                name, sh.get("both_pending_ms", 0), (sh.get("inference") or {}).get("share"),
                (sh.get("training") or {}).get("share"), sh.get("switches")))
            self.save()

    def trace_pair(self, inf, trn, iname, tname, rate):
        """Both workers trace one window that starts at the same CLOCK_MONOTONIC
        instant: the trainer iterates through it, the service serves Poisson
        arrivals at rate from its start. Returns the pair's record."""
        cfg = self.cfg
        seed = cfg.seed * 1000 + 500 + len(self.state["trace_pairs"])
        n = int(math.ceil(rate * cfg.trace_window_s)) + 1
        offsets = [o for o in core.poisson_offsets(rate, n, seed) if o < cfg.trace_window_s]
        paths = {role: core.pair_trace_relpath(iname, tname, role) for role in ("inference", "training")}
        t0 = time.monotonic_ns() + int((cfg.trace_lead_s + 0.2) * 1e9)
        msg = {"cmd": "traced", "t0_ns": t0, "window_s": cfg.trace_window_s, "lead_s": cfg.trace_lead_s}
        trn.send(dict(msg, workload=tname, path=os.path.join(self.out, paths["training"])))
        inf.send(dict(msg, workload=iname, path=os.path.join(self.out, paths["inference"]), offsets=offsets))
        replies, errs = {}, []
        for role, w in (("inference", inf), ("training", trn)):
            try:
                replies[role] = w.reply(cfg.trace_lead_s + cfg.trace_window_s + 120)
            except WorkerError as e:
                errs.append(e)
                w.drain(2.0)
        if errs:
            raise errs[0]
        t1 = t0 + int(cfg.trace_window_s * 1e9)
        ri = replies["inference"]
        lat, svc = core.request_times(ri["arrivals"], ri["starts"], ri["ends"])
        its, partial = core.iterations_in_window(replies["training"]["iters"], t0, t1)
        rec = {"name": core.pair_name(iname, tname, cfg.trace_load), "inference": iname, "training": tname,
               "load": cfg.trace_load, "rate_rps": rate, "seed": seed, "requests": len(offsets),
               "window_s": cfg.trace_window_s, "t0_monotonic_ns": t0, "traces": paths,
               "trace_bytes": {role: r["bytes"] for role, r in replies.items()},
               "latency_ms": core.summarize(lat), "service_ms": core.summarize(svc),
               "training_iterations": len(its), "training_iteration_partial": partial,
               "training_iteration_ms": core.mean(its)}
        rec.update(analyze_pair(self.out, rec))
        return rec

    # -- MPS spin sweep ----------------------------------------------------

    def spin_sweep(self, inf, trns):
        """The spin trainers, built in the MPS trainer client of the highest
        percentage, each beside cfg.spin_inference at spin_load: one trace
        and spin_solo_iters iterations alone each, the service alone, then
        one window of spin_requests requests beside each, all on the same
        arrivals; slowdowns against the service alone and the trainer alone."""
        cfg = self.cfg
        pct = max(trns)
        trn, iname = trns[pct], cfg.spin_inference
        sw = self.state["spin_sweep"] = {"status": "starting", "inference": iname, "pct": pct, "load": cfg.spin_load,
                                         "requests": cfg.spin_requests, "trainers": {}, "windows": []}
        rate = self.rate_at(iname, cfg.spin_load)
        if not rate:
            sw.update({"status": "not run", "why": "no solo service time of %s" % iname})
            return
        if self.left() < core.spin_sweep_estimate(cfg, workloads.guesses()) + cfg.est_teardown_s:
            sw.update({"status": "not run", "why": "deadline"})
            return
        new = [n for n in cfg.spin_training if n not in cfg.training]
        if new:
            r = trn.call({"cmd": "init", "workloads": new}, min(self.args.init_timeout_s, 150.0))
            for n, info in r["workloads"].items():
                self.state["workloads"].setdefault(n, {}).update({"info": info})
        for n in cfg.spin_training:
            if not (self.state["workloads"].get(n) or {}).get("trace"):
                self.profile(trn, n, "training")
            r = trn.call({"cmd": "solo", "workload": n, "n": cfg.spin_solo_iters}, 300)
            solo = {"iteration_ms": core.summarize(r["ms"]), "n": len(r["ms"]), "mps_pct": pct}
            self.state["solo"].setdefault(n, solo)
            info = (self.state["workloads"].get(n) or {}).get("info") or {}
            sw["trainers"][n] = dict({k: info.get(k) for k in ("block_us", "measured_block_us", "mem_bytes_per_block",
                                                              "mem_gbps", "kernels_per_iter")}, solo=solo)
        seed = cfg.seed * 1000 + 900
        sw["rate_rps"] = rate
        sw["solo"] = self.serve(inf, iname, rate, cfg.spin_requests, "spin-solo", cfg.spin_load, seed=seed)
        for n in cfg.spin_training:
            g = {"mode": "mps", "pct": pct, "training": n, "windows": [{"inference": iname, "load": cfg.spin_load}]}
            self.run_group(g, inf, trn, 0, requests=cfg.spin_requests, seed=seed, into=sw["windows"])
        for w in sw["windows"]:
            w["latency_slowdown"] = core.ratios(w["latency_ms"], sw["solo"]["latency_ms"])
            w["service_slowdown"] = core.ratios(w["service_ms"], sw["solo"]["service_ms"])
            it = sw["trainers"][w["training"]]["solo"]["iteration_ms"].get("mean")
            if it and w.get("training_iteration_ms"):
                w["training_slowdown"] = round(w["training_iteration_ms"] / it, 4)
        sw["status"] = "done"
        self.save()

    # -- the end -----------------------------------------------------------

    def cleanup(self):
        self.phase("stop workers and daemon")
        self.close_workers()
        if self.daemon is not None and self.daemon.started:
            q = self.daemon.quit()
            self.state["mps"]["quit"] = q
            if not q["ok"]:
                log("MPS quit: rc %s %s %s" % (q.get("rc"), q.get("stdout"), q.get("stderr")))
        if self.args.backend == "fake":
            shutil.rmtree(os.path.join(self.out, "fake-gpu"), ignore_errors=True)

    def finalize(self):
        self.phase("finalize")
        self.collect_imports()
        if self.args.colocd and (os.path.exists(self.args.colocd) or shutil.which(self.args.colocd)):
            import_profiles(self.out, self.state, self.args.colocd, only_measured=True)
        self.state["finished"] = utcnow()
        self.phase(None)
        self.save()
        self.raw.close()
        write_summary(self.out, self.state)

    def write_measurements(self):
        assemble(self.out, self.state)


def assemble(out, st):
    """Write measurements.json from the run state: one record per finished
    window whose two profiles were imported."""
    profiles = {n: p["path"] for n, p in st["profiles"].items() if p.get("ok")}
    env = dict(st["env"])
    env.update(env.get("worker") or {})
    env["precision"] = st.get("precision")
    device = {"name": env.get("device_name"), "sms": env.get("sms")}
    cfg = st["config"]
    src = core.source_string(env, st["started"], st.get("backend", "torch"),
                             extra="Poisson arrivals, seed %d; loads %s (time-slicing), %s (MPS)" % (
                                 cfg["seed"], cfg["timeslice_loads"], cfg["mps_load"]))
    sweep = st.get("spin_sweep") or {}
    doc = core.build_measurements(src, device, st["windows"] + (sweep.get("windows") or []), profiles)
    st["measurements"] = {"records": len(doc["records"]), "problems": core.check_measurements(doc)}
    if doc["records"]:
        core.write_json_atomic(os.path.join(out, "measurements.json"), doc)
    pairs = [p for p in st.get("trace_pairs") or [] if p.get("shares")]
    if pairs:
        core.write_json_atomic(os.path.join(out, "timeslice_shares.json"),
                               {"format": core.SHARES_FORMAT, "source": src, "device": device, "records": pairs})
    if sweep.get("windows"):
        core.write_json_atomic(os.path.join(out, "mps_spin_sweep.json"),
                               dict(sweep, format=core.SPIN_SWEEP_FORMAT, source=src, device=device))
    return doc


def analyze_pair(out, rec):
    """The shares of one traced pair, from its two traces under out: each
    trace's clock (core.trace_clock) and core.timeslice_share over the
    pair's window. A trace that cannot be read gives shares_error."""
    work, clock = [], {}
    try:
        for role in ("inference", "training"):
            with gzip.open(os.path.join(out, rec["traces"][role]), "rt") as f:
                doc = json.load(f)
            c = core.trace_clock(doc)
            clock[role] = {"method": c["method"], "error_us": round(c["error_ns"] / 1e3, 3)}
            work.append(core.trace_gpu_work(doc, c["offset_ns"]))
    except (OSError, ValueError, KeyError) as e:
        return {"shares": None, "shares_error": "%s: %s" % (type(e).__name__, e)}
    t0 = rec["t0_monotonic_ns"]
    return {"clock": clock, "shares": core.timeslice_share(work, t0, t0 + int(rec["window_s"] * 1e9))}


def write_summary(out, st):
    lines = ["colocd GPU harness run: %s, backend %s" % (st.get("started"), st.get("backend"))]
    env = dict(st.get("env") or {})
    env.update(env.get("worker") or {})
    lines.append("device %s (%s SMs); driver %s; torch %s" % (env.get("device_name"), env.get("sms"),
                                                             env.get("driver_version"), env.get("torch")))
    lines.append("elapsed %.0f s; MPS: %s" % (st.get("elapsed_s", 0), (st.get("mps") or {}).get("status")))
    lines.append("")
    lines.append("phase                                              at_s  seconds")
    for p in st.get("phases", []):
        lines.append("%-48s %6.1f %8s" % (p["phase"], p["at_s"], p.get("seconds", "")))
    lines.append("")
    lines.append("solo")
    for n, s in sorted((st.get("solo") or {}).items()):
        if "iteration_ms" in s:
            lines.append("  %-16s iteration mean %.3f ms" % (n, s["iteration_ms"].get("mean", 0)))
        else:
            lines.append("  %-16s service mean %.3f p99 %.3f ms; rates %s" % (
                n, s["service_backtoback_ms"].get("mean", 0), s["service_backtoback_ms"].get("p99", 0), s.get("rates")))
    lines.append("")
    lines.append("%-46s %6s %8s %9s %9s %9s %9s %9s" % ("window", "n", "rate", "lat mean", "lat p99", "svc mean",
                                                        "svc p99", "iter ms"))
    for w in st.get("windows", []):
        lines.append("%-46s %6d %8.1f %9.3f %9.3f %9.3f %9.3f %9s" % (
            w["name"], w["requests"], w["rate_rps"], w["latency_ms"].get("mean", 0), w["latency_ms"].get("p99", 0),
            w["service_ms"].get("mean", 0), w["service_ms"].get("p99", 0),
            "%.2f" % w["training_iteration_ms"] if w.get("training_iteration_ms") else "-"))
    if st.get("trace_pairs"):
        lines.append("")
        lines.append("time slicing traced from both sides: share of GPU time while both had work [bounds]")
        lines.append("%-52s %9s %20s %20s %8s %9s" % ("pair", "both ms", "inference", "training", "switches",
                                                     "turn p50"))
        for p in st["trace_pairs"]:
            sh = p.get("shares") or {}
            cols = ["%.3f [%.3f-%.3f]" % (sh[r]["share"], sh[r]["share_min"], sh[r]["share_max"])
                    if (sh.get(r) or {}).get("share") is not None else "-" for r in ("inference", "training")]
            turn = ((sh.get("training") or {}).get("turn_us") or {}).get("p50")
            lines.append("%-52s %9.1f %20s %20s %8s %9s" % (p["name"], sh.get("both_pending_ms", 0), cols[0], cols[1],
                                                            sh.get("switches", "-"), "%.0f us" % turn if turn else "-"))
    sweep = st.get("spin_sweep")
    if sweep:
        lines.append("")
        lines.append("MPS spin sweep beside %s at %s %%: %s%s" % (sweep.get("inference"), sweep.get("pct"),
                                                                 sweep.get("status"),
                                                                 " (%s)" % sweep["why"] if sweep.get("why") else ""))
        for w in sweep.get("windows") or []:
            t = (sweep.get("trainers") or {}).get(w["training"]) or {}
            lines.append("  %-22s block %s us (timed %s), %s B/block: service x%s, latency p99 x%s, iteration x%s" % (
                w["training"], t.get("block_us"), t.get("measured_block_us") or "-", t.get("mem_bytes_per_block"),
                w.get("service_slowdown", {}).get("mean"), w.get("latency_slowdown", {}).get("p99"),
                w.get("training_slowdown")))
    if st.get("skipped"):
        lines.append("")
        lines.append("skipped: " + "; ".join("%s (%s)" % (s["what"], s["why"]) for s in st["skipped"]))
    if st.get("errors"):
        lines.append("")
        lines.append("errors:")
        lines.extend("  " + e["where"] + ": " + e["error"] for e in st["errors"])
    m = st.get("measurements") or {}
    lines.append("")
    lines.append("measurements.json: %s records%s" % (m.get("records", 0),
                                                     "; problems: %s" % m["problems"] if m.get("problems") else ""))
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def import_profiles(out, st, colocd, only_measured=False):
    """Import every traced workload with --unit-ms set to its solo unit
    (core.solo_unit_ms), so that a profile lasts what the workload ran
    without the profiler; a workload with no solo figure is imported as
    traced (unless only_measured: then its import is left as it was)."""
    os.makedirs(os.path.join(out, "profiles"), exist_ok=True)
    for name, w in st.get("workloads", {}).items():
        if not w.get("trace"):
            continue
        unit = core.solo_unit_ms((st.get("solo") or {}).get(name))
        if only_measured and not unit:
            continue
        kind = workloads.SPECS.get(name, {}).get("kind") or (w.get("info") or {}).get("kind")
        argv = core.import_argv(colocd, os.path.join(out, w["trace"]["path"]),
                                os.path.join(out, core.profile_relpath(name)), name, kind, unit)
        p = subprocess.run(argv, capture_output=True, text=True)
        sys.stderr.write(p.stdout + p.stderr)
        entry = {"ok": p.returncode == 0, "argv": argv, "rc": p.returncode, "stdout": p.stdout,
                 "stderr": p.stderr, "unit_ms": unit}
        if p.returncode == 0:
            entry["path"] = core.profile_relpath(name)
        elif unit and (st["profiles"].get(name) or {}).get("ok"):
            # The traced import stands (its file was not replaced: colocd
            # writes nothing on an error); say why the fit was refused.
            st["profiles"][name]["unit_fit_error"] = p.stderr.strip() or "exit %d" % p.returncode
            continue
        st["profiles"][name] = entry


def finalize_only(args):
    """Import the traces again and rebuild measurements.json from run.json
    (e.g. on another machine, when the GPU box had no colocd)."""
    out = os.path.abspath(args.out)
    with open(os.path.join(out, "run.json")) as f:
        st = json.load(f)
    import_profiles(out, st, args.colocd)
    for p in st.get("trace_pairs") or []:
        p.update(analyze_pair(out, p))
    assemble(out, st)
    core.write_json_atomic(os.path.join(out, "run.json"), st)
    write_summary(out, st)
    print("measurements.json: %d records" % st["measurements"]["records"])
    return 0


def log(msg):
    sys.stderr.write("[%s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def build_config(a):
    kw = {}
    if a.inference:
        kw["inference"] = parse_list(a.inference)
    if a.training:
        kw["training"] = parse_list(a.training)
    if a.timeslice_loads is not None:
        kw["timeslice_loads"] = parse_list(a.timeslice_loads, float)
    if a.mps_load is not None:
        kw["mps_load"] = a.mps_load
    if a.mps_pcts:
        kw["mps_pcts"] = parse_list(a.mps_pcts, float)
    if a.spin_training:
        kw["spin_training"] = parse_list(a.spin_training)
    for k in ("budget_s", "seed", "min_requests", "max_requests", "solo_requests", "solo_backtoback",
              "solo_train_iters", "min_window_s", "max_window_s", "ts_traces", "trace_window_s", "trace_load",
              "spin_sweep", "spin_inference", "spin_load", "spin_requests"):
        v = getattr(a, k, None)
        if v is not None:
            kw[k] = v
    if a.backend == "fake":
        kw.setdefault("est_init_s", 1.0)
        kw.setdefault("est_profile_s", 0.2)
        kw.setdefault("est_mps_start_s", 0.5)
        kw.setdefault("est_teardown_s", 2.0)
        kw.setdefault("est_group_overhead_s", 0.2)
    return core.Config(**kw)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    default_colocd = os.path.join(HERE, "bin", "colocd")
    ap.add_argument("--colocd", default=default_colocd if os.path.exists(default_colocd) else "colocd",
                    help="the colocd binary (default: tools/gpu-harness/bin/colocd, else colocd on PATH)")
    ap.add_argument("--budget-s", type=float, default=None, help="global deadline, seconds (default %g)"
                    % core.Config.DEFAULTS["budget_s"])
    ap.add_argument("--backend", choices=["torch", "fake"], default="torch")
    ap.add_argument("--python", default=sys.executable, help="interpreter of the workers")
    ap.add_argument("--device", default="cuda", help="torch device of the workers (cpu: a smoke test)")
    ap.add_argument("--precision", default="tf32", choices=["tf32", "fp32", "bf16"])
    ap.add_argument("--scale", default="full", choices=["full", "tiny"])
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--gpu", default=None, help="CUDA_VISIBLE_DEVICES for the workers and the daemon")
    ap.add_argument("--mps-control", default="nvidia-cuda-mps-control")
    ap.add_argument("--mps-pipe-dir", default=None, help="the daemon's pipe directory (default: a new temporary one)")
    ap.add_argument("--no-mps", action="store_true")
    ap.add_argument("--no-timeslice", action="store_true")
    ap.add_argument("--inference", default=None, help="comma-separated inference workloads")
    ap.add_argument("--training", default=None, help="comma-separated training workloads")
    ap.add_argument("--timeslice-loads", default=None, help="comma-separated loads (fractions of solo capacity)")
    ap.add_argument("--mps-load", type=float, default=None)
    ap.add_argument("--mps-pcts", default=None, help="comma-separated training active-thread percentages")
    ap.add_argument("--min-requests", type=int, default=None)
    ap.add_argument("--max-requests", type=int, default=None)
    ap.add_argument("--min-window-s", type=float, default=None)
    ap.add_argument("--max-window-s", type=float, default=None)
    ap.add_argument("--solo-requests", type=int, default=None)
    ap.add_argument("--solo-backtoback", type=int, default=None)
    ap.add_argument("--solo-train-iters", type=int, default=None)
    ap.add_argument("--init-timeout-s", type=float, default=240.0)
    ap.add_argument("--ts-traces", action="store_true", default=None,
                    help="trace every inference x training pair from both sides under time slicing (opt-in: about "
                         "30 s; run with BUDGET_S=380)")
    ap.add_argument("--trace-window-s", type=float, default=None, help="the traced pairs' common window (default %g)"
                    % core.Config.DEFAULTS["trace_window_s"])
    ap.add_argument("--trace-load", type=float, default=None)
    ap.add_argument("--spin-sweep", action="store_true", default=None,
                    help="spin trainers of varied block time and memory traffic beside one service under MPS "
                         "(opt-in: about 40 s; needs CuPy)")
    ap.add_argument("--spin-training", default=None, help="comma-separated spin trainers of the sweep")
    ap.add_argument("--spin-inference", default=None, help="the sweep's inference service (one of --inference)")
    ap.add_argument("--spin-load", type=float, default=None)
    ap.add_argument("--spin-requests", type=int, default=None)
    ap.add_argument("--plan", action="store_true", help="print the run plan and its estimated budget, and exit")
    ap.add_argument("--finalize-only", action="store_true",
                    help="re-import the traces in --out and rebuild measurements.json from run.json")
    a = ap.parse_args(argv)
    if a.finalize_only:
        return finalize_only(a)
    cfg = build_config(a)
    if a.seed is None:
        a.seed = cfg.seed
    names = cfg.inference + cfg.training + (cfg.spin_training if cfg.spin_sweep else [])
    unknown = [n for n in names if n not in workloads.SPECS]
    if unknown:
        ap.error("unknown workloads %s (known: %s)" % (unknown, ", ".join(workloads.SPECS)))
    if cfg.spin_sweep and cfg.spin_inference not in cfg.inference:
        ap.error("--spin-inference %s is not one of --inference %s" % (cfg.spin_inference, ",".join(cfg.inference)))
    if a.plan:
        print_plan(cfg, not a.no_mps)
        return 0

    def on_term(signum, frame):
        raise Terminated("signal %d" % signum)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    os.makedirs(a.out, exist_ok=True)
    r = Runner(a, cfg)
    rc = 0
    try:
        r.run()
    except Terminated as e:
        r.error("run", e)
        rc = 3
    except Exception as e:
        r.error("run", e)
        traceback.print_exc()
        rc = 1
    finally:
        # Ignore further signals while the daemon quits and files are written.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            r.cleanup()
        except Exception as e:
            r.error("cleanup", e)
            rc = rc or 1
        r.finalize()
    with open(os.path.join(r.out, "summary.txt")) as f:
        sys.stderr.write(f.read())
    return rc


def print_plan(cfg, mps):
    phases = core.estimate_budget(cfg, workloads.guesses(), mps=mps)
    total = sum(p[1] for p in phases)
    print("budget %g s; estimated from guessed H200 times (workloads.SPECS guess_ms), not measurements" % cfg.budget_s)
    for name, secs, note in phases:
        print("%-55s %7.1f s  %s" % (name, secs, note))
    print("%-55s %7.1f s" % ("total", total))
    groups = core.plan_windows(cfg, mps)
    print("%d co-located windows in %d groups" % (core.count_windows(groups), len(groups)))


if __name__ == "__main__":
    sys.exit(main())
