#!/usr/bin/env python3
"""Make a SYNTHETIC colocd.measurements/v1 dataset (no GPU): hand-made
profiles, and "measured" values that are colocd's own predictions under known
device parameters (the truth) with a few percent of noise.

It exists to test the harness's output format, the accuracy script and the
calibration end to end on a machine without a GPU: a fit on these records
should recover the truth and predict left-out workloads closely. It says
nothing about real GPUs; its "source" says so.

  python3 synth.py --colocd /tmp/colocd --out /tmp/synth
  python3 accuracy.py --colocd /tmp/colocd --measurements /tmp/synth/measurements.json
"""

import argparse
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import core  # noqa: E402

SMS = 132
DEVICE = {"name": "SYNTHETIC (no GPU)", "sms": SMS}
TRUTH = {"timeslice": {"slice_us": 1500.0, "switch_us": 100.0, "holdover_us": 400.0},
         "mps": {"coefficients": {"dram": 0.6, "l2": 0.2, "kernels": 0.1}}}


def ops(n, dur, gap, sm, occ, dram, l2, every=1, big_gap=None):
    out = []
    for i in range(n):
        g = big_gap if (big_gap is not None and i % every == 0) else gap
        out.append({"name": "op%d" % i, "dur_us": dur, "gap_us": 0.0 if i == 0 else g, "sm": sm,
                    "occupancy": occ, "dram": dram, "l2": l2})
    return out


# Hand-made profiles that differ where the models care: kernel size, host
# gaps (idle trainers), SM fill and memory intensity.
PROFILES = {
    "syn-infer-a": ("inference", ops(12, 180.0, 15.0, 1.0, 0.6, 0.3, 0.3)),
    "syn-infer-b": ("inference", ops(24, 40.0, 35.0, 0.3, 0.5, 0.6, 0.4)),
    "syn-train-x": ("training", ops(60, 400.0, 5.0, 1.0, 0.7, 0.5, 0.4)),
    "syn-train-y": ("training", ops(30, 500.0, 20.0, 0.8, 0.6, 0.2, 0.2, every=3, big_gap=1500.0)),
    "syn-train-z": ("training", ops(40, 250.0, 50.0, 0.6, 0.5, 0.8, 0.6)),
}


def write_profiles(out):
    paths = {}
    os.makedirs(os.path.join(out, "profiles"), exist_ok=True)
    for name, (kind, o) in PROFILES.items():
        p = {"format": core.PROFILE_FORMAT, "name": name, "kind": kind, "device": DEVICE, "ops": o,
             "notes": ["SYNTHETIC: hand-made for tools/gpu-harness tests, not a measurement"]}
        rel = core.profile_relpath(name)
        core.write_json_atomic(os.path.join(out, rel), p)
        paths[name] = rel
    return paths


def unit_ms(name):
    return sum(o["dur_us"] + o["gap_us"] for o in PROFILES[name][1]) / 1e3


def predict_argv(colocd, out, inf, trains, mode, rate, pct, requests, seed, cal):
    argv = [colocd, "predict", "--inference", os.path.join(out, core.profile_relpath(inf))]
    for t in trains:
        argv += ["--training", os.path.join(out, core.profile_relpath(t))]
    argv += ["--mode", mode, "--rate", repr(rate), "--requests", str(requests), "--seed", str(seed),
             "--calibration", cal, "--json"]
    if mode == "mps":
        argv += ["--pct", "%g" % pct, "--sms", str(SMS)]
    return argv


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--colocd", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--inference", default="syn-infer-a,syn-infer-b")
    ap.add_argument("--training", default="syn-train-x,syn-train-y,syn-train-z")
    ap.add_argument("--timeslice-loads", default="0.2,0.35")
    ap.add_argument("--mps-load", type=float, default=0.3)
    ap.add_argument("--mps-pcts", default="100,50,25")
    ap.add_argument("--requests", type=int, default=300, help="requests behind each 'measured' value, recorded in each record")
    ap.add_argument("--seed", type=int, default=7, help="arrival seed of the 'measurements', recorded in each record")
    ap.add_argument("--noise", type=float, default=0.02, help="relative noise on every value")
    a = ap.parse_args(argv)
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    profiles = write_profiles(out)
    cal = os.path.join(out, "truth.calibration.json")
    core.write_json_atomic(cal, {"format": "colocd.calibration/v1", "device": DEVICE,
                                 "source": "SYNTHETIC truth of tools/gpu-harness/synth.py, not fitted",
                                 "timeslice": TRUTH["timeslice"], "mps": TRUTH["mps"]})
    rng = random.Random(a.seed)
    runs = []
    infs, trains = a.inference.split(","), a.training.split(",")
    for t in trains:
        for load in [float(x) for x in a.timeslice_loads.split(",") if x]:
            for i in infs:
                runs.append(("timeslice", i, t, load, None))
    for p in [float(x) for x in a.mps_pcts.split(",") if x]:
        for t in trains:
            for i in infs:
                runs.append(("mps", i, t, a.mps_load, p))
    windows = []
    for mode, i, t, load, pct in runs:
        rate = core.rate_for(load, unit_ms(i))
        r = subprocess.run(predict_argv(a.colocd, out, i, [t], mode, rate, pct, a.requests, a.seed, cal),
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr)
            return 1
        pred = json.loads(r.stdout)

        def noisy(v):
            return round(v * (1 + rng.uniform(-a.noise, a.noise)), 4)
        w = {"mode": mode, "pct": pct, "inference": i, "training": t, "load": load, "rate_rps": rate,
             "requests": a.requests, "seed": a.seed,
             "latency_ms": {k: noisy(pred["inference"]["latency_ms"][k]) for k in core.PERCENTILE_KEYS},
             "service_ms": {k: noisy(pred["inference"]["service_ms"][k]) for k in core.PERCENTILE_KEYS}}
        it = pred["training"][0].get("iteration_ms")
        if it:
            w["training_iteration_ms"] = noisy(it)
        windows.append(w)
    src = ("SYNTHETIC, not measured on any GPU: tools/gpu-harness/synth.py, colocd predict under known "
           "parameters %s (%d requests, seed %d) with +-%g %% noise" % (json.dumps(TRUTH, sort_keys=True), a.requests,
                                                                         a.seed, 100 * a.noise))
    doc = core.build_measurements(src, DEVICE, windows, profiles)
    errs = core.check_measurements(doc)
    if errs:
        sys.stderr.write("\n".join(errs) + "\n")
        return 1
    core.write_json_atomic(os.path.join(out, "measurements.json"), doc)
    print("%s: %d records" % (os.path.join(out, "measurements.json"), len(doc["records"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
