#!/usr/bin/env python3
"""Choose the guard's forecast defaults by cross-validation across traces.

For each setting of the forecast (alpha, beta, phi, burst) on a grid, replay
each trace with `colocd replay --json --policies forecast` at each server
error, and score a run by the training work it kept against a static grant
minus a price for each minute over the SLO and each revoke. Leave one trace
out: pick the setting best on the other traces, report its figures on the
one left out; the default is the setting best on all traces, reported with
the held-out figures beside it. Every run is cached in --out, so a second
call only replays what is new.

  python3 tools/guard-tuning/cv.py --colocd bin/colocd \
      --trace testdata/traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv --trace code.csv
"""
import argparse
import concurrent.futures
import itertools
import json
import os
import subprocess
import sys

GRID = {
    "alpha": [0.2, 0.5],
    "beta": [0.1, 0.3],
    "phi": [0.8, 0.9],
    "burst": [0, 0.5, 1, 2],
}
ERRORS = [1.0, 1.3, 1.5]
MINUTE_PRICE = 0.1   # a minute over the SLO costs a tenth of a static grant's work
REVOKE_PRICE = 0.01


def setting_key(s):
    return ",".join(f"{k}={s[k]}" for k in sorted(s))


def replay(colocd, server, trace, err, s, cache):
    key = f"{server}|{trace}|{err}|{setting_key(s)}"
    if key in cache:
        return key, cache[key]
    out = subprocess.run([colocd, "replay", "--server", server, "--trace", trace, "--error", str(err),
                          "--policies", "forecast", "--json", "--forecast", setting_key(s)],
                         check=True, capture_output=True, text=True).stdout
    return key, json.loads(out)["policies"][0]


def score(r):
    return r["work_vs_static"] - MINUTE_PRICE * r["minutes_over"] - REVOKE_PRICE * r["revokes"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--colocd", default="bin/colocd")
    ap.add_argument("--trace", action="append", required=True)
    ap.add_argument("--server", default="predictor", choices=["predictor", "llm"])
    ap.add_argument("--out", default="guard-cv.json", help="the cache of runs, and the report")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    if len(a.trace) < 2:
        sys.exit("cv.py: --trace: want at least two traces, one to leave out")
    cache = {}
    if os.path.exists(a.out):
        with open(a.out) as f:
            cache = json.load(f).get("runs", {})
    settings = [dict(zip(GRID, v)) for v in itertools.product(*GRID.values())]
    todo = [(t, e, s) for t in a.trace for e in ERRORS for s in settings]
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for key, r in ex.map(lambda x: replay(a.colocd, a.server, *x, cache), todo):
            cache[key] = r
    with open(a.out, "w") as f:
        json.dump({"runs": cache}, f, indent=1, sort_keys=True)

    def mean_score(s, traces):
        return sum(score(cache[f"{a.server}|{t}|{e}|{setting_key(s)}"]) for t in traces for e in ERRORS) / (len(traces) * len(ERRORS))

    def rows(s, t):
        return [cache[f"{a.server}|{t}|{e}|{setting_key(s)}"] for e in ERRORS]

    print(f"server {a.server}; score = work vs static − {MINUTE_PRICE} × minutes over − {REVOKE_PRICE} × revokes, mean over errors {ERRORS}")
    for held in a.trace:
        train = [t for t in a.trace if t != held]
        best = max(settings, key=lambda s: mean_score(s, train))
        print(f"\nleft out {os.path.basename(held)}: best on the others {setting_key(best)} (their score {mean_score(best, train):.3f})")
        print(f"  held out: score {mean_score(best, [held]):.3f}; " + "; ".join(
            f"error {e}: {r['minutes_over']} of {r['minutes']} over, work {r['work_vs_static']:.2f}, revokes {r['revokes']}"
            for e, r in zip(ERRORS, rows(best, held))))
    best = max(settings, key=lambda s: mean_score(s, a.trace))
    print(f"\nbest on all traces: {setting_key(best)} (score {mean_score(best, a.trace):.3f})")
    for t in a.trace:
        print(f"  {os.path.basename(t)}: " + "; ".join(
            f"error {e}: {r['minutes_over']} of {r['minutes']} over, work {r['work_vs_static']:.2f}, revokes {r['revokes']}"
            for e, r in zip(ERRORS, rows(best, t))))
    ranked = sorted(settings, key=lambda s: -mean_score(s, a.trace))
    print("\nall settings, best first (score on all traces):")
    for s in ranked:
        print(f"  {mean_score(s, a.trace):7.3f}  {setting_key(s)}")


if __name__ == "__main__":
    main()
