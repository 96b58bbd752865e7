"""The harness's pure logic: no torch, no GPU, no subprocess.

Everything here is deterministic and unit-tested on a machine without a GPU
(tests/test_core.py): Poisson arrival schedules, percentiles with colocd's
definition, the run plan and its time budget, the MPS environment and control
commands, parsers for nvidia-smi and the MPS control daemon, the worker
protocol, and the assembly of the colocd.measurements/v1 document.
"""

import bisect
import gzip
import json
import math
import os
import re
import select
import tempfile

import gorand

PERCENTILE_KEYS = ("mean", "p50", "p90", "p95", "p99")
MEASUREMENTS_FORMAT = "colocd.measurements/v1"
PROFILE_FORMAT = "colocd.profile/v1"
MODES = ("timeslice", "mps")

# ---------------------------------------------------------------------------
# Statistics


def quantile_sorted(xs, q):
    """The q-quantile of sorted xs by linear interpolation between closest
    ranks (R-7, NumPy's default), exactly as colocd's quantileSorted."""
    if not xs:
        raise ValueError("quantile of no values")
    h = q * (len(xs) - 1)
    lo = math.floor(h)
    i = int(lo)
    if i >= len(xs) - 1:
        return xs[-1]
    return xs[i] + (h - lo) * (xs[i + 1] - xs[i])


def summarize(values, ndigits=4):
    """mean, p50, p90, p95, p99 of values (ms), rounded to ndigits decimals.

    Returns {} for no values. A key whose value is not > 0 after rounding is
    left out: colocd.measurements/v1 requires every percentile to be > 0."""
    if not values:
        return {}
    xs = sorted(float(v) for v in values)
    out = {"mean": sum(xs) / len(xs)}
    for key, q in (("p50", 0.50), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99)):
        out[key] = quantile_sorted(xs, q)
    out = {k: round(v, ndigits) for k, v in out.items()}
    return {k: v for k, v in out.items() if v > 0 and math.isfinite(v)}


def poisson_offsets(rate_rps, n, seed):
    """n arrival times (seconds from the start) of a Poisson process at
    rate_rps: exactly the arrivals colocd's simulation draws for the same
    rate, requests and seed (Go's PCG and ExpFloat64, gorand.py), so a
    measured window and its simulation see the same request stream."""
    if not rate_rps > 0:
        raise ValueError("rate must be > 0, got %r" % (rate_rps,))
    if n < 0:
        raise ValueError("n must be >= 0")
    return [t / 1e6 for t in gorand.colocd_arrivals_us(rate_rps, n, seed)]


def request_times(arrivals, starts, ends):
    """Per request latency (arrival -> completion) and service (start of
    execution -> completion), in ms, from times in ns on one clock."""
    if not (len(arrivals) == len(starts) == len(ends)):
        raise ValueError("arrivals, starts and ends differ in length")
    lat, svc = [], []
    for a, s, e in zip(arrivals, starts, ends):
        if not a <= e or not s <= e:
            raise ValueError("a request ends before it arrives or starts")
        lat.append((e - a) / 1e6)
        svc.append((e - s) / 1e6)
    return lat, svc


def iterations_in_window(iters, t0, t1):
    """Training iteration times (ms) of the iterations (start_ns, end_ns)
    that lie wholly inside [t0, t1]. When none does (an iteration longer
    than the window), the ones that overlap it, and the flag says so."""
    inside = [(e - s) / 1e6 for s, e in iters if s >= t0 and e <= t1]
    if inside:
        return inside, False
    overlap = [(e - s) / 1e6 for s, e in iters if e > t0 and s < t1]
    return overlap, True


def trainer_covers(iters, t0, t1):
    """Whether the trainer's iterations (start_ns, end_ns), in order, ran
    through [t0, t1]: one started by t0, one ended at or after t1."""
    if not iters:
        return False
    return iters[0][0] <= t0 and iters[-1][1] >= t1


def mean(xs):
    return sum(xs) / len(xs) if xs else None


# ---------------------------------------------------------------------------
# The run plan


class Config(object):
    """What to measure and how long it may take. Every field has a default
    sized for one H200 run of about five minutes (docs/accuracy.md)."""

    DEFAULTS = {
        "inference": ["resnet50-infer", "bert-infer", "gpt-decode"],
        "training": ["resnet50-train", "gpt2-train", "bert-train"],
        # Loads are fractions of the service's solo capacity: rate = load /
        # solo mean service time.
        "timeslice_loads": [0.15, 0.3],
        "mps_load": 0.3,
        "mps_pcts": [100, 50, 25],
        "budget_s": 300.0,
        "seed": 1,
        # Per window (one inference service at one rate next to one trainer).
        "min_requests": 150,
        "max_requests": 1500,
        "min_window_s": 1.5,
        "max_window_s": 8.0,
        "min_train_iters": 4,
        "slowdown_guess": 2.0,
        # Solo measurements.
        "solo_backtoback": 50,
        "solo_requests": 150,
        "solo_train_iters": 20,
        "mps_solo_train_iters": 5,
        # Profiles: profiler steps recorded (the importer takes the median).
        "profile_requests": 5,
        "profile_train_steps": 3,
        "warmup_requests": 20,
        "warmup_train_iters": 3,
        # Estimates of fixed costs, seconds (used for budgeting only).
        "est_init_s": 35.0,
        "est_profile_s": 5.0,
        "est_window_overhead_s": 0.4,
        "est_group_overhead_s": 2.0,
        "est_mps_start_s": 5.0,
        "est_teardown_s": 15.0,
        # Opt-in phases (issue #51); each adds its estimate to the budget
        # (the default 300 s is spent by the phases above: run them with
        # BUDGET_S=380, or alone, see README.md).
        # Time slicing seen from both sides: every inference x training pair
        # with a Kineto trace of both processes over one common window.
        "ts_traces": False,
        "trace_window_s": 0.5,
        "trace_lead_s": 0.3,
        "trace_load": 0.3,
        "est_trace_pair_s": 3.0,
        # MPS block waits apart from bandwidth: spin trainers beside one
        # inference service, at the first (highest) MPS percentage.
        "spin_sweep": False,
        "spin_training": ["spin-long-train", "spin-short-train", "spin-mem-low-train", "spin-mem-high-train"],
        "spin_inference": "bert-infer",
        "spin_load": 0.07,
        "spin_requests": 50,
        "spin_solo_iters": 5,
        "est_spin_init_s": 8.0,
        "est_spin_profile_s": 1.5,
    }

    def __init__(self, **kw):
        for k, v in self.DEFAULTS.items():
            setattr(self, k, list(v) if isinstance(v, list) else v)
        for k, v in kw.items():
            if k not in self.DEFAULTS:
                raise KeyError("unknown config key %r" % k)
            setattr(self, k, v)

    def as_dict(self):
        return {k: getattr(self, k) for k in self.DEFAULTS}


def load_key(load):
    return "%.2f" % load


def record_name(inference, training, mode, load, pct=None):
    """A record's name: inference+training@mode[pct],load=L."""
    m = "ts" if mode == "timeslice" else "mps%g" % pct
    return "%s+%s@%s,load=%s" % (inference, training, m, load_key(load))


def plan_windows(cfg, mps=True):
    """The co-located windows in the order they run, grouped: a group is one
    training process running one training workload (for MPS at one
    percentage) while the inference worker serves each window in turn.

    Returns a list of groups {mode, pct, training, windows: [{inference,
    load}]}: time-slicing first (so that its data is in hand if MPS
    fails), then MPS by falling percentage."""
    groups = []
    for t in cfg.training:
        ws = [{"inference": i, "load": l} for l in cfg.timeslice_loads for i in cfg.inference]
        if ws:
            groups.append({"mode": "timeslice", "pct": None, "training": t, "windows": ws})
    if mps:
        for p in cfg.mps_pcts:
            for t in cfg.training:
                ws = [{"inference": i, "load": cfg.mps_load} for i in cfg.inference]
                groups.append({"mode": "mps", "pct": p, "training": t, "windows": ws})
    return groups


def count_windows(groups):
    return sum(len(g["windows"]) for g in groups)


def window_items(groups, rates, train_ms, cfg):
    """(rate, expected co-located iteration ms) of every window of groups:
    rates maps (inference, load key) to req/s, train_ms a training workload
    to its solo iteration time. Windows without a rate are left out."""
    items = []
    for g in groups:
        it = colocated_iter_ms(train_ms.get(g["training"]), g["mode"], g.get("pct"), cfg)
        for w in g["windows"]:
            r = rates.get((w["inference"], load_key(w["load"])))
            if r:
                items.append((r, it))
    return items


def window_cost(window_s, items, cfg):
    """Seconds the windows take when each aims at window_s: it serves
    requests_for(window_s, ...) requests at its rate, plus the overhead."""
    return sum(requests_for(window_s, r, cfg, it) / r + cfg.est_window_overhead_s for r, it in items)


def fit_windows(free_s, items, cfg):
    """The longest window target in [min_window_s, max_window_s] whose
    windows fit in free_s, by bisection (the cost grows with the target).
    Returns (seconds, tight, cost); tight is True when even the minimum
    does not fit (the deadline then skips the last windows)."""
    lo, hi = cfg.min_window_s, cfg.max_window_s
    if not items:
        return hi, False, 0.0
    if window_cost(hi, items, cfg) <= free_s:
        return hi, False, window_cost(hi, items, cfg)
    if window_cost(lo, items, cfg) > free_s:
        return lo, True, window_cost(lo, items, cfg)
    for _ in range(40):
        mid = (lo + hi) / 2
        if window_cost(mid, items, cfg) <= free_s:
            lo = mid
        else:
            hi = mid
    return lo, False, window_cost(lo, items, cfg)


def colocated_iter_ms(solo_iter_ms, mode, pct, cfg):
    """A guess of a trainer's co-located iteration time, to size windows:
    time-slicing slows it by slowdown_guess; under MPS its percentage does
    (100/pct). None when the solo time is unknown."""
    if not solo_iter_ms:
        return None
    if mode == "mps":
        return solo_iter_ms * 100.0 / (pct or 100)
    return solo_iter_ms * cfg.slowdown_guess


def requests_for(window_s, rate_rps, cfg, train_iter_ms=None):
    """How many requests a window serves: window_s at rate_rps, at least
    long enough to span min_train_iters iterations of train_iter_ms (the
    expected co-located iteration time), clamped to [min_requests,
    max_requests]."""
    n = int(round(window_s * rate_rps))
    if train_iter_ms:
        need_s = cfg.min_train_iters * train_iter_ms / 1e3
        n = max(n, int(math.ceil(need_s * rate_rps)))
    return max(cfg.min_requests, min(cfg.max_requests, n))


def rate_for(load, solo_service_ms):
    """The request rate (req/s, rounded to 0.1) at a fraction load of the
    service's solo capacity."""
    if not solo_service_ms > 0 or not 0 < load < 1:
        raise ValueError("want solo service > 0 and load in (0,1)")
    return max(0.1, round(load * 1e3 / solo_service_ms, 1))


def trace_pairs(cfg):
    """The (inference, training) pairs traced from both sides, in the order
    they run: one training workload at a time, as the windows."""
    return [(i, t) for t in cfg.training for i in cfg.inference]


def trace_pairs_estimate(cfg):
    """Seconds of the traced time-slicing pairs: per pair the lead, the
    window and the export of two traces (0 when not asked for)."""
    if not cfg.ts_traces:
        return 0.0
    return len(trace_pairs(cfg)) * (cfg.trace_lead_s + cfg.trace_window_s + cfg.est_trace_pair_s)


def spin_sweep_estimate(cfg, guesses):
    """Seconds of the MPS spin sweep: the spin workloads built in the
    trainer client, a trace and a few iterations of each, the service alone
    and one window beside each (0 when not asked for)."""
    if not cfg.spin_sweep or not cfg.spin_training:
        return 0.0
    window = cfg.spin_requests / rate_for(cfg.spin_load, guesses[cfg.spin_inference]) + cfg.est_window_overhead_s
    t = cfg.est_spin_init_s + window
    for n in cfg.spin_training:
        t += cfg.est_spin_profile_s + cfg.spin_solo_iters * guesses[n] / 1e3 + cfg.est_group_overhead_s + window
    return t


def estimate_budget(cfg, guesses, mps=True):
    """A static estimate of each phase's seconds for the whole run, from
    guessed solo times: guesses = {workload: ms} (service time of one
    request, or one training iteration). Returns [(phase, seconds, note)].

    The runner sizes the windows itself from measured solo times and the
    time left; this is the documented budget and what --plan prints."""
    phases = []
    phases.append(("start workers, build models, warm up (time-slicing)", cfg.est_init_s,
                   "import torch, CUDA context, cuDNN autotuning; both workers in parallel"))
    n_prof = len(cfg.inference) + len(cfg.training)
    prof = n_prof * cfg.est_profile_s
    phases.append(("profiler traces (%d)" % n_prof, prof, "%d requests / %d steps each, trace export and gzip"
                   % (cfg.profile_requests, cfg.profile_train_steps)))
    solo = 0.0
    loads = sorted(set(cfg.timeslice_loads + ([cfg.mps_load] if mps else [])))
    for i in cfg.inference:
        s = guesses[i] / 1e3
        solo += cfg.solo_backtoback * s
        for l in loads:
            solo += cfg.solo_requests / (l / s) + cfg.est_window_overhead_s
    for t in cfg.training:
        solo += (cfg.solo_train_iters + cfg.warmup_train_iters) * guesses[t] / 1e3
    phases.append(("solo latency and iteration times", solo, "%d back-to-back + %d Poisson requests per load; %d iterations"
                   % (cfg.solo_backtoback, cfg.solo_requests, cfg.solo_train_iters)))
    groups = plan_windows(cfg, mps)
    traced = trace_pairs_estimate(cfg)
    spin = spin_sweep_estimate(cfg, guesses) if mps else 0.0
    fixed = sum(p[1] for p in phases) + cfg.est_teardown_s + traced + spin
    mps_solo = 0.0
    if mps:
        fixed += cfg.est_mps_start_s + cfg.est_init_s
        mps_solo = sum(cfg.mps_solo_train_iters * guesses[t] / 1e3 * 100.0 / p
                       for t in cfg.training for p in cfg.mps_pcts)
        fixed += mps_solo
    rates = {(i, load_key(l)): rate_for(l, guesses[i]) for i in cfg.inference for l in loads}
    train_ms = {t: guesses[t] for t in cfg.training}
    free = cfg.budget_s - fixed - len(groups) * cfg.est_group_overhead_s
    win_s, tight, _ = fit_windows(free, window_items(groups, rates, train_ms, cfg), cfg)
    for mode in MODES:
        gs = [g for g in groups if g["mode"] == mode]
        if not gs:
            continue
        k = count_windows(gs)
        items = window_items(gs, rates, train_ms, cfg)
        secs = len(gs) * cfg.est_group_overhead_s + window_cost(win_s, items, cfg)
        reqs = [requests_for(win_s, r, cfg, it) for r, it in items]
        note = "%d groups x %d windows aiming at %.1f s, %d-%d requests each%s" % (
            len(gs), k // len(gs), win_s, min(reqs), max(reqs), " (TIGHT: minimum)" if tight else "")
        if mode == "mps":
            phases.append(("MPS: start daemon, clients, build, warm up", cfg.est_mps_start_s + cfg.est_init_s,
                           "inference at 100 %% + one trainer process per percentage %s, in parallel" % cfg.mps_pcts))
            phases.append(("MPS: solo trainers at each percentage", mps_solo, "%d iterations each" % cfg.mps_solo_train_iters))
        phases.append(("%s co-located windows (%d)" % (mode, k), secs, note))
    if traced:  # after the time-slicing windows (or the solo phase), as it runs
        at = 1 + max(i for i, p in enumerate(phases) if p[0].startswith(("timeslice", "solo")))
        phases.insert(at, ("time slicing traced from both sides (%d pairs)" % len(trace_pairs(cfg)), traced,
                           "%.1f s lead + %.1f s window each, both processes under torch.profiler"
                           % (cfg.trace_lead_s, cfg.trace_window_s)))
    if spin:
        phases.append(("MPS spin sweep (%d trainers)" % len(cfg.spin_training), spin,
                       "beside %s at load %g, %d requests per window" % (cfg.spin_inference, cfg.spin_load,
                                                                       cfg.spin_requests)))
    phases.append(("stop workers, quit MPS daemon, write files", cfg.est_teardown_s, ""))
    return phases


# ---------------------------------------------------------------------------
# Time slicing from both sides: two Kineto traces over one window

SHARES_FORMAT = "colocd.timeslice-shares/v1"
SPIN_SWEEP_FORMAT = "colocd.mps-spin-sweep/v1"
# The key a traced worker adds to its Kineto trace: the window it was asked
# for and its clock marks, so that the trace is read without run.json.
TRACE_CLOCK_KEY = "colocd_clock"
CLOCK_MARKS = ("colocd-clock-start", "colocd-clock-end")
# What occupies a context on the GPU, and what makes its work pending.
GPU_CATS = ("kernel", "gpu_memset", "gpu_memcpy")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def pair_name(inference, training, load):
    return "%s+%s@ts-traced,load=%s" % (inference, training, load_key(load))


def pair_trace_relpath(inference, training, role):
    return "traces/timeslice-pairs/%s+%s.%s.json.gz" % (inference, training, role)


def union(ivs):
    """The union of intervals (start, end): sorted, disjoint, non-empty."""
    out = []
    for s, e in sorted(iv for iv in ivs if iv[1] > iv[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def intersect(a, b):
    """The intersection of two sorted disjoint interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def length(ivs):
    return sum(e - s for s, e in ivs)


def clock_mark(label, annotate):
    """One clock mark: the annotate() context (an event named label in the
    trace) bracketed by CLOCK_MONOTONIC and CLOCK_REALTIME readings."""
    import time
    m0, r0 = time.monotonic_ns(), time.time_ns()
    with annotate():
        pass
    r1, m1 = time.time_ns(), time.monotonic_ns()
    return {"name": label, "monotonic_ns": [m0, m1], "realtime_ns": [r0, r1]}


def trace_clock(doc):
    """How a trace's timestamps (µs) map to CLOCK_MONOTONIC ns, the clock the
    harness's processes share: mono_ns = ts_us * 1000 + offset_ns.

    The worker brackets each record_function(mark) with monotonic and
    realtime readings (doc[TRACE_CLOCK_KEY]["marks"]); matched with the
    marks' user_annotation events they give the offset (method "marks";
    error_ns: the widest half-bracket or half the marks' disagreement).
    When no event matches, Kineto's timestamps are taken for CLOCK_REALTIME
    µs after baseTimeNanoseconds, converted with the marks' realtime and
    monotonic readings (method "realtime"). ValueError without marks."""
    marks = (doc.get(TRACE_CLOCK_KEY) or {}).get("marks") or []
    if not marks:
        raise ValueError("the trace has no %s marks" % TRACE_CLOCK_KEY)
    seen = {}
    for e in doc.get("traceEvents") or []:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") in CLOCK_MARKS:
            seen.setdefault(e["name"], float(e["ts"]))
    offs, half = [], 0.0
    for m in marks:
        if m["name"] in seen:
            m0, m1 = m["monotonic_ns"]
            offs.append((m0 + m1) / 2.0 - seen[m["name"]] * 1e3)
            half = max(half, (m1 - m0) / 2.0)
    if offs:
        return {"offset_ns": sum(offs) / len(offs), "method": "marks",
                "error_ns": max(half, (max(offs) - min(offs)) / 2.0)}
    # In integers: realtime and the base are near 2**61 ns, where a float
    # keeps 256 ns steps.
    rt = [(sum(m["realtime_ns"]) - sum(m["monotonic_ns"])) // 2 for m in marks]
    spread = max(abs(m["realtime_ns"][1] - m["realtime_ns"][0]) + abs(m["monotonic_ns"][1] - m["monotonic_ns"][0])
                 for m in marks) / 2.0
    return {"offset_ns": float(int(doc.get("baseTimeNanoseconds") or 0) - sum(rt) // len(rt)), "method": "realtime",
            "error_ns": max(spread, (max(rt) - min(rt)) / 2.0)}


def trace_gpu_work(doc, offset_ns):
    """Every kernel (memset, copy) of a trace as (launch, start, end) in
    monotonic ns, sorted by start: launch is the runtime or driver call of
    the same correlation (the work is pending from then on), else the start."""
    launch, work = {}, []
    for e in doc.get("traceEvents") or []:
        if e.get("ph") != "X":
            continue
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") in LAUNCH_CATS and corr is not None:
            launch.setdefault(corr, float(e["ts"]))
        elif e.get("cat") in GPU_CATS:
            work.append((corr, float(e["ts"]), float(e.get("dur") or 0)))
    out = []
    for corr, ts, dur in work:
        s = ts * 1e3 + offset_ns
        l = min(s, launch.get(corr, ts) * 1e3 + offset_ns)
        out.append((int(round(l)), int(round(s)), int(round(s + dur * 1e3))))
    out.sort(key=lambda k: k[1])
    return out


class _Cursor(object):
    """Membership of rising points in a sorted disjoint interval list."""

    def __init__(self, ivs):
        self.ivs, self.i = ivs, 0

    def inside(self, p):
        while self.i < len(self.ivs) and self.ivs[self.i][1] <= p:
            self.i += 1
        return self.i < len(self.ivs) and self.ivs[self.i][0] <= p


def timeslice_share(work, t0, t1, names=("inference", "training")):
    """The GPU share of two contexts while both have work, from their traced
    kernels: work = (kernels of one, kernels of the other), each a list of
    (launch, start, end) ns on one clock (trace_gpu_work); [t0, t1] the
    common window.

    A context has work from a kernel's launch to its end. Over the time both
    have work, each context's kernel time is split into what it ran alone
    and what overlaps the other's: time slicing runs one context at a time,
    so an overlap is a kernel preempted while the other ran. An overlap is
    given to the context whose latest kernel started last (a start means its
    context held the GPU); share_min and share_max bound the share without
    that rule (the overlap to neither, or all to this one). A turn is a
    stretch given to one context between switches to the other, a switch gap
    the idle time between two turns; turns and gaps that a window's edge or
    an end of "both have work" cuts are counted but not summarized."""
    win = [(t0, t1)]
    pend = [intersect(union((l, e) for l, s, e in w), win) for w in work]
    both = intersect(pend[0], pend[1])
    run = [intersect(union((s, e) for l, s, e in w), both) for w in work]
    starts = [sorted(s for l, s, e in w) for w in work]
    pts = set()
    for ivs in [both] + run:
        for s, e in ivs:
            pts.update((s, e))
    for st in starts:
        pts.update(s for s in st if t0 < s < t1)
    pts = sorted(pts)
    cb, c0, c1 = _Cursor(both), _Cursor(run[0]), _Cursor(run[1])
    alone, given, over, idle = [0, 0], [0, 0], 0, 0
    segs = []  # (start, end, owner: 0, 1 or None for idle), inside both
    for p, q in zip(pts, pts[1:]):
        if not cb.inside(p):
            segs.append(None)
            continue
        r = (c0.inside(p), c1.inside(p))
        if r[0] and r[1]:
            over += q - p
            last = [st[bisect.bisect_right(st, p) - 1] if st and st[0] <= p else -1 for st in starts]
            owner = 0 if last[0] > last[1] else 1
            given[owner] += q - p
        elif r[0] or r[1]:
            owner = 0 if r[0] else 1
            alone[owner] += q - p
        else:
            owner = None
            idle += q - p
        segs.append((p, q, owner))
    turns, gaps, cut = _turns(segs)
    busy = alone[0] + alone[1] + over
    res = {"window_ms": round((t1 - t0) / 1e6, 4), "both_pending_ms": round(length(both) / 1e6, 4),
           "busy_ms": round(busy / 1e6, 4), "overlap_ms": round(over / 1e6, 4), "idle_ms": round(idle / 1e6, 4),
           "switches": len(gaps), "switch_gap_us": summarize([g / 1e3 for g in gaps]), "cut_turns": cut}
    for i, n in enumerate(names):
        res[n] = {"share": round((alone[i] + given[i]) / busy, 4) if busy else None,
                  "share_min": round(alone[i] / busy, 4) if busy else None,
                  "share_max": round((alone[i] + over) / busy, 4) if busy else None,
                  "kernel_ms": round((alone[i] + given[i]) / 1e6, 4), "alone_ms": round(alone[i] / 1e6, 4),
                  "pending_ms": round(length(pend[i]) / 1e6, 4),
                  "kernels": sum(1 for l, s, e in work[i] if s < t1 and e > t0),
                  "turns": len(turns[i]), "turn_us": summarize([t / 1e3 for t in turns[i]])}
    return res


def _turns(segs):
    """Turns (per owner, ns) and switch gaps (ns) of timeslice_share's
    segments (None: outside both-have-work); only those between two
    switches count, the others are returned as a number cut."""
    turns, gaps, cut = ([], []), [], 0
    cur = None  # [owner, start, last busy end, began with a switch]
    for sg in segs + [None]:
        if sg is None or (sg[2] is not None and cur is not None and sg[2] != cur[0]):
            if cur is not None:
                if sg is not None and cur[3]:
                    turns[cur[0]].append(cur[2] - cur[1])
                else:
                    cut += 1
                if sg is not None:
                    gaps.append(sg[0] - cur[2])
            cur = None if sg is None else [sg[2], sg[0], sg[1], cur is not None]
            continue
        if sg[2] is None:
            continue
        if cur is None:
            cur = [sg[2], sg[0], sg[1], False]
        else:
            cur[2] = sg[1]
    return turns, gaps, cut


def ratios(num, den, ndigits=4):
    """num[k] / den[k] for every key both have (a slowdown per percentile)."""
    return {k: round(num[k] / den[k], ndigits) for k in num if (den or {}).get(k)}


# ---------------------------------------------------------------------------
# MPS

MPS_PID_FILE = "nvidia-cuda-mps-control.pid"
_PID = re.compile(r"^[1-9][0-9]{0,9}$")


def mps_env(base, pipe_dir, log_dir, pct=None, visible=None):
    """The environment of the MPS daemon or of a client: base plus the
    daemon's own pipe and log directories, the client's active-thread
    percentage (clients only) and the GPU (CUDA_VISIBLE_DEVICES) if given."""
    if not pipe_dir or not log_dir:
        raise ValueError("want a pipe and a log directory")
    env = dict(base)
    env["CUDA_MPS_PIPE_DIRECTORY"] = pipe_dir
    env["CUDA_MPS_LOG_DIRECTORY"] = log_dir
    env.pop("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", None)
    if pct is not None:
        p = float(pct)
        if not 0 < p <= 100:
            raise ValueError("active-thread percentage must be in (0,100], got %r" % pct)
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = "%g" % p
    if visible:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return env


def plain_env(base, visible=None):
    """A time-slicing worker's environment: no MPS variable at all, so that
    it cannot attach to a daemon by accident."""
    env = {k: v for k, v in base.items() if not k.startswith("CUDA_MPS_")}
    if visible:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return env


def daemon_start_argv(control):
    """Start the control daemon in the background (it forks and returns)."""
    return [control, "-d"]


def control_argv(control):
    """One control session: the command goes on stdin; EOF ends it."""
    return [control]


def control_input(verb, *args):
    """The text of one control command; arguments must be PIDs or numbers,
    so nothing else can reach the control pipe."""
    allowed = {"quit", "get_server_list", "ps", "get_client_list", "get_server_status",
               "terminate_client", "get_default_active_thread_percentage"}
    if verb not in allowed:
        raise ValueError("unsupported control command %r" % verb)
    for a in args:
        if not _PID.match(str(a)):
            raise ValueError("control argument %r is not a PID" % (a,))
    return " ".join([verb] + [str(a) for a in args]) + "\n"


def parse_pid_lines(text):
    """get_server_list / get_client_list: one PID per line."""
    pids = []
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if not _PID.match(s):
            raise ValueError("want one PID per line, got %r" % s)
        pids.append(int(s))
    return pids


PS_HEADER = ["PID", "ID", "SERVER", "DEVICE", "NAMESPACE", "COMMAND"]


def parse_ps(text):
    """The daemon's ps: a header, then PID ID SERVER DEVICE NAMESPACE COMMAND."""
    rows, header = [], False
    for line in text.splitlines():
        if not line.strip():
            continue
        f = line.split()
        if not header:
            if f != PS_HEADER:
                raise ValueError("want the ps header %s, got %r" % (" ".join(PS_HEADER), line))
            header = True
            continue
        if len(f) < 5 or not _PID.match(f[0]) or not _PID.match(f[2]):
            raise ValueError("bad ps row %r" % line)
        rows.append({"pid": int(f[0]), "id": f[1], "server": int(f[2]), "device": f[3],
                     "namespace": f[4], "command": " ".join(f[5:])})
    return rows


def new_clients_in_log(control_log):
    """Client PIDs that control.log records as connected (NEW CLIENT <pid>)."""
    return [int(m) for m in re.findall(r"NEW CLIENT (\d+)", control_log or "")]


def mps_attachment(pids, servers, ps_rows, client_lists, control_log):
    """Whether every worker PID is an MPS client, with the evidence. A PID
    counts when ps lists it, when a server's client list has it, or when
    control.log records it as a new client. No server at all means no
    client attached (a client that finds no daemon silently runs without
    MPS, so this check is what keeps a plain run from posing as MPS)."""
    seen = set(r["pid"] for r in ps_rows)
    for cl in client_lists.values():
        seen.update(cl)
    seen.update(new_clients_in_log(control_log))
    missing = [p for p in pids if p not in seen]
    ok = bool(servers) and not missing
    return ok, {"servers": list(servers), "clients_seen": sorted(seen), "missing": missing}


# ---------------------------------------------------------------------------
# nvidia-smi

SMI_FIELDS = ["name", "uuid", "driver_version", "compute_mode", "mig.mode.current", "memory.total"]


def smi_query_argv(fields=SMI_FIELDS):
    return ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


def parse_smi_query(text, fields=SMI_FIELDS):
    """nvidia-smi --query-gpu=... --format=csv,noheader: one dict per GPU."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        vals = [v.strip() for v in line.split(",")]
        if len(vals) != len(fields):
            raise ValueError("want %d fields, got %r" % (len(fields), line))
        out.append(dict(zip(fields, vals)))
    return out


def parse_smi_cuda_version(text):
    """The driver's CUDA version from nvidia-smi's banner, or None."""
    m = re.search(r"CUDA Version:\s*([0-9]+(?:\.[0-9]+)*)", text or "")
    return m.group(1) if m else None


def sharing_allowed(compute_mode):
    """Which modes the GPU's compute mode allows, without changing it:
    time-slicing needs two processes (Default); MPS works in Default and
    Exclusive_Process (the MPS server is then the one process)."""
    m = (compute_mode or "").strip().lower().replace(" ", "_")
    if m in ("default", ""):
        return {"timeslice": None, "mps": None}
    if m in ("exclusive_process",):
        return {"timeslice": "compute mode Exclusive_Process allows one process: time-slicing not measured (GPU settings are never changed)",
                "mps": None}
    return {"timeslice": "compute mode %s: no co-location possible without changing it" % compute_mode,
            "mps": "compute mode %s: no co-location possible without changing it" % compute_mode}


# ---------------------------------------------------------------------------
# Worker protocol: one JSON object per line.


def encode(msg):
    return (json.dumps(msg, separators=(",", ":"), allow_nan=False) + "\n").encode()


def decode(line):
    if isinstance(line, bytes):
        line = line.decode()
    msg = json.loads(line)
    if not isinstance(msg, dict):
        raise ValueError("a protocol message must be a JSON object")
    return msg


class LineReader(object):
    """Reads lines from a file descriptor with a timeout (select), so that a
    stuck peer cannot hang its reader."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = b""
        self.eof = False

    def _take(self):
        i = self.buf.find(b"\n")
        if i < 0:
            return None
        line, self.buf = self.buf[:i], self.buf[i + 1:]
        return line.decode()

    def poll(self):
        """A complete line if one is ready now, else None."""
        return self.readline(0)

    def readline(self, timeout):
        """The next line (without its newline); None on timeout; raises
        EOFError when the peer closed with no complete line left."""
        import time
        line = self._take()
        if line is not None:
            return line
        end = None if timeout is None else time.monotonic() + timeout
        while not self.eof:
            wait = None if end is None else max(0.0, end - time.monotonic())
            r, _, _ = select.select([self.fd], [], [], wait)
            if not r:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.eof = True
                break
            self.buf += chunk
            line = self._take()
            if line is not None:
                return line
            if end is not None and time.monotonic() >= end:
                return None
        raise EOFError("peer closed")


# ---------------------------------------------------------------------------
# Files


def write_json_atomic(path, obj, indent=1):
    """Write obj as JSON to path through a temporary file and a rename."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=indent, allow_nan=False)
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_trace(path, doc, clock):
    """A Kineto trace (a dict) gzipped at path, with the worker's clock
    marks and window under TRACE_CLOCK_KEY."""
    doc = dict(doc)
    doc[TRACE_CLOCK_KEY] = clock
    with gzip.open(path, "wt", compresslevel=6) as f:
        json.dump(doc, f, separators=(",", ":"))


def slim_trace(doc):
    """A Kineto trace cut to what timeslice_share and trace_clock read: the
    GPU's work, the calls that launched it, user annotations, metadata
    events, and every top-level key. CPU operators and flow events (most of
    a training trace) go. A bare event list (the legacy export) is wrapped."""
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    keep = set(GPU_CATS + LAUNCH_CATS + ("user_annotation", "gpu_user_annotation"))
    out = dict(doc)
    out["traceEvents"] = [e for e in doc.get("traceEvents") or [] if e.get("cat") in keep or e.get("ph") == "M"]
    return out


def profile_relpath(name):
    return "profiles/%s.json" % name


def trace_relpath(name):
    return "traces/%s.json.gz" % name


def import_argv(colocd, trace, out, name, kind, unit_ms=None):
    """colocd profile import for one trace: an inference trace's unit is the
    median record_function("request") annotation, a training trace's the
    median ProfilerStep. With unit_ms (the unit timed without the profiler:
    solo_unit_ms), the profile's host gaps are scaled to match."""
    argv = [colocd, "profile", "import", "--format", "kineto", "--kind", kind, "--name", name, "--out", out]
    if kind == "inference":
        argv += ["--annotation", "request"]
    if unit_ms:
        argv += ["--unit-ms", repr(float(unit_ms))]
    return argv + [trace]


def solo_unit_ms(solo):
    """The unit a workload's profile should last, from its solo figures
    (run.json -> solo[name]): the mean back-to-back request (inference) or
    the mean iteration (training), both timed without the profiler; None
    when not measured. The profiler stretches the host gaps (on the H200
    a BERT training step ran 42.05 ms traced and 30.45 ms untraced), and
    these are what the co-located windows ran."""
    for key in ("service_backtoback_ms", "iteration_ms"):
        v = ((solo or {}).get(key) or {}).get("mean")
        if v:
            return float(v)
    return None


# ---------------------------------------------------------------------------
# Measurements


def source_string(env, when, backend="torch", extra=None):
    """The measurements' source: where, when and with what. A fake backend's
    data says it is synthetic."""
    if backend != "torch":
        s = ("SYNTHETIC, not measured: tools/gpu-harness measure.py with the %s backend (no GPU), %s"
             % (backend, when))
    else:
        s = "measured by tools/gpu-harness measure.py on %s (%s SMs), %s" % (
            env.get("device_name", "unknown GPU"), env.get("sms", "?"), when)
    bits = []
    for label, key in (("driver", "driver_version"), ("driver CUDA", "driver_cuda"), ("torch", "torch"),
                       ("torch CUDA", "torch_cuda"), ("cuDNN", "cudnn"), ("precision", "precision"),
                       ("kernel", "kernel")):
        v = env.get(key)
        if v not in (None, ""):
            bits.append("%s %s" % (label, v))
    if bits:
        s += "; " + ", ".join(bits)
    if extra:
        s += "; " + extra
    return s


def measurement_record(window, profiles):
    """One colocd.measurements/v1 record from a finished window.

    window: {mode, pct, inference, training, load, rate_rps, latency_ms,
    service_ms, training_iteration_ms}; profiles: workload -> relative path.
    Returns None when the window lacks a profile or measured values."""
    inf, tr = window["inference"], window["training"]
    if inf not in profiles or tr not in profiles:
        return None
    measured = {}
    if window.get("latency_ms"):
        measured["latency_ms"] = {k: window["latency_ms"][k] for k in PERCENTILE_KEYS if k in window["latency_ms"]}
    if window.get("service_ms"):
        measured["service_ms"] = {k: window["service_ms"][k] for k in PERCENTILE_KEYS if k in window["service_ms"]}
    it = window.get("training_iteration_ms")
    if it is not None and it > 0:
        measured["training_iteration_ms"] = round(it, 4)
    if not measured:
        return None
    rec = {"name": record_name(inf, tr, window["mode"], window["load"], window.get("pct")),
           "mode": window["mode"], "inference": profiles[inf], "training": [profiles[tr]],
           "rate_rps": window["rate_rps"]}
    if window["mode"] == "mps":
        rec["training_pct"] = window["pct"]
    # The window's own request count and arrival seed: calibration then
    # simulates the very arrivals that were served.
    if window.get("requests"):
        rec["requests"] = int(window["requests"])
    if window.get("seed") is not None:
        rec["seed"] = int(window["seed"])
    rec["measured"] = measured
    return rec


def build_measurements(source, device, windows, profiles):
    """The colocd.measurements/v1 document of the finished windows."""
    recs = []
    for w in windows:
        r = measurement_record(w, profiles)
        if r is not None:
            recs.append(r)
    doc = {"format": MEASUREMENTS_FORMAT, "source": source}
    if device:
        doc["device"] = {k: v for k, v in device.items() if k in ("name", "sms") and v not in (None, "")}
    doc["records"] = recs
    return doc


def check_measurements(doc):
    """The rules of docs/formats.md that need no profile: a list of errors
    (empty when the document is well formed). colocd calibrate is the
    authority; this catches mistakes before a run's data leaves the GPU."""
    errs = []
    if doc.get("format") != MEASUREMENTS_FORMAT:
        errs.append("format: want %r" % MEASUREMENTS_FORMAT)
    unknown = set(doc) - {"format", "source", "device", "records"}
    if unknown:
        errs.append("unknown keys %s" % sorted(unknown))
    recs = doc.get("records") or []
    if not recs:
        errs.append("records: want at least one")
    rec_keys = {"name", "mode", "inference", "training", "rate_rps", "training_pct", "inference_pct",
                "requests", "seed", "measured"}
    for i, r in enumerate(recs):
        at = "records[%d]" % i
        if set(r) - rec_keys:
            errs.append("%s: unknown keys %s" % (at, sorted(set(r) - rec_keys)))
        if not r.get("name"):
            errs.append(at + ".name: empty")
        if r.get("mode") not in MODES:
            errs.append(at + ".mode: want timeslice or mps")
        rate = r.get("rate_rps")
        if not isinstance(rate, (int, float)) or not 0.001 <= rate <= 1e9:
            errs.append(at + ".rate_rps: want a rate in [0.001, 1e9]")
        if r.get("mode") == "mps":
            p = r.get("training_pct")
            if not isinstance(p, (int, float)) or not 0 < p <= 100:
                errs.append(at + ".training_pct: want (0,100]")
        m = r.get("measured") or {}
        if set(m) - {"latency_ms", "service_ms", "training_iteration_ms"}:
            errs.append(at + ".measured: unknown keys")
        for q in ("latency_ms", "service_ms"):
            for k, v in (m.get(q) or {}).items():
                if k not in PERCENTILE_KEYS:
                    errs.append("%s.measured.%s.%s: unknown percentile" % (at, q, k))
                elif not v > 0:
                    errs.append("%s.measured.%s.%s: want > 0" % (at, q, k))
        it = m.get("training_iteration_ms")
        its = it if isinstance(it, list) else ([] if it is None else [it])
        if its and len(its) != len(r.get("training") or []):
            errs.append(at + ".measured.training_iteration_ms: want one per training job")
        for v in its:
            if not v > 0:
                errs.append(at + ".measured.training_iteration_ms: want > 0")
        if not m.get("latency_ms") and not m.get("service_ms") and not its:
            errs.append(at + ".measured: want at least one value")
    return errs


def workload_key(training_names):
    """The training workload of a record as colocd's leave-one-workload-out
    groups MPS records: the sorted training profile names joined by '+'."""
    return "+".join(sorted(training_names))
