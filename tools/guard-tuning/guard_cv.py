#!/usr/bin/env python3
"""Choose a guard setting by leave-one-trace-out cross-validation.

Each candidate is a name and admission.guard keys set through their
environment overrides (the default replay takes the guard's keys from them);
a key with a dot is a whole key path (admission.headroom=0.05), which the
default replay takes too where it is one of admission's own; a name ending
in @POLICY replays that candidate under POLICY instead of --policy
('learned@learned:'), so that two guards compare as two settings do.
Every candidate is replayed on every trace, both servers and every error,
and each replay is scored as the policy's work against the hindsight
oracle's, less MINUTE_PRICE for each minute over the SLO that the server
alone was not over, and REVOKE_PRICE for each revoke; where the oracle
itself does almost no work (under MIN_ORACLE of a full job), the share means
nothing and only the prices count. Leaving one trace out, the candidate best
on the other traces is reported with its score on the one left out; the
candidate best on all is the default. Runs are cached under --out.

  python3 tools/guard-tuning/guard_cv.py --colocd bin/colocd --policy forecast \\
      --candidate 'step 10:' --candidate 'step 5:RAISE_STEP_PCT=5,MIN_MOVE_PCT=5'
"""
import argparse
import concurrent.futures
import json
import os
import subprocess

TRACES = {
    "conv": "testdata/traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv",
    "onoff": "synthetic:onoff",
    "diurnal": "synthetic:diurnal",
    "flash": "synthetic:flash",
}
SERVERS = ["llm", "predictor"]
ERRORS = ["0.7", "1.0", "1.3", "2.0"]
MINUTE_PRICE = 0.1
REVOKE_PRICE = 0.01
MIN_ORACLE = 0.02  # of a job at 100 % all the trace long
POLICIES = ["forecast", "learned", "reactive"]


def parse_candidate(s, policy):
    name, _, keys = s.partition(":")
    name, _, own = name.partition("@")
    env = {}
    for kv in filter(None, keys.split(",")):
        k, _, v = kv.partition("=")
        k = k.strip()
        var = "COLOCD_" + k.upper().replace(".", "_") if "." in k else "COLOCD_ADMISSION_GUARD_" + k.upper()
        env[var] = v.strip()
    return name.strip(), env, own.strip() or policy


def replay(colocd, out, policy, name, env, trace, server, err):
    path = os.path.join(out, name.replace(" ", "_"), f"{trace}_{server}_{err}.json")
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path) as f:
            return (name, trace, server, err), json.load(f)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    res = subprocess.run([colocd, "replay", "--trace", TRACES[trace], "--server", server, "--error", err,
                          "--policies", policy + ",oracle", "--json"],
                         check=True, capture_output=True, text=True, env={**os.environ, **env}).stdout
    with open(path, "w") as f:
        f.write(res)
    return (name, trace, server, err), json.loads(res)


def score(doc, policy):
    p = {r["name"]: r for r in doc["policies"]}
    r, o = p[policy], p["oracle"]
    full = 100 * 60 * max(1, r["minutes"])
    work = r["work_vs_oracle"] if o["work_pct_seconds"] >= MIN_ORACLE * full else 0
    return work - MINUTE_PRICE * (r["minutes_over"] - r["minutes_over_alone"]) - REVOKE_PRICE * r["revokes"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--colocd", default="bin/colocd")
    ap.add_argument("--policy", default="forecast", choices=POLICIES)
    ap.add_argument("--candidate", action="append", required=True, help="'name[@POLICY]:KEY=V,KEY=V' (admission.guard keys, or whole key paths such as admission.headroom)")
    ap.add_argument("--error", action="append", help="errors to score on (default all four)")
    ap.add_argument("--out", default="guard-cv")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    cands = [parse_candidate(c, a.policy) for c in a.candidate]
    for _, _, p in cands:
        if p not in POLICIES:
            ap.error(f"--candidate: policy {p!r}: want one of {POLICIES}")
    policy = {n: p for n, _, p in cands}
    errors = a.error or ERRORS
    todo = [(p, n, e, t, s, x) for n, e, p in cands for t in TRACES for s in SERVERS for x in errors]
    runs = {}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for k, doc in ex.map(lambda c: replay(a.colocd, a.out, *c), todo):
            runs[k] = doc

    def mean(name, traces):
        xs = [score(runs[(name, t, s, x)], policy[name]) for t in traces for s in SERVERS for x in errors]
        return sum(xs) / len(xs)

    names = [n for n, _, _ in cands]
    print(f"policy {a.policy} (unless a candidate names its own); score = work vs oracle − {MINUTE_PRICE} × minutes over beyond the server alone's"
          f" − {REVOKE_PRICE} × revokes, mean over both servers and errors {errors}")
    for held in TRACES:
        train = [t for t in TRACES if t != held]
        best = max(names, key=lambda n: mean(n, train))
        print(f"left out {held}: chosen {best!r} (on the others {mean(best, train):.3f}); held out {mean(best, [held]):.3f}; "
              + ", ".join(f"{n!r} {mean(n, [held]):.3f}" for n in names))
    for n in sorted(names, key=lambda n: -mean(n, list(TRACES))):
        print(f"all traces: {n!r} {mean(n, list(TRACES)):.3f}")


if __name__ == "__main__":
    main()
