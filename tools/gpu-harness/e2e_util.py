#!/usr/bin/env python3
"""e2e.sh's helpers (stdlib only): waits on colocd's status and on JSON
files with a bound, the steps' records, and the results files.

  e2e_util.py record RES NAME STATUS [--gpu-only] [--reason TEXT] [KEY=VALUE ...]
  e2e_util.py status-wait --timeout S --cond EXPR [--save FILE]   # s: `colocd status --json`
  e2e_util.py json-wait FILE --timeout S --cond EXPR              # d: the file's JSON
  e2e_util.py events-wait FILE --timeout S --cond EXPR            # ev: `colocd run --json` events
  e2e_util.py get FILE EXPR                                        # prints EXPR of the JSON (d)
  e2e_util.py rate FILE SECONDS                                    # a worker's units/s over SECONDS
  e2e_util.py slos QUOTES.json                                     # SLOs for the grant, throttle and revoke
  e2e_util.py report RES OUT                                       # results.json and results.md
  e2e_util.py check RES                                            # the dry run's assertions

An EXPR is a Python expression over those names; status-wait runs $COLOCD
(with the COLOCD_* environment the script exported) each 0.25 s, each run
bounded by 5 s. A wait prints its last value's JSON on failure.
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import core  # noqa: E402

FORMAT = "colocd.e2e/v1"

# The steps, in order, each with whether it is meaningful only on a GPU and
# what the dry run (BACKEND=fake) asserts about it: "pass", or "skip" with
# the reason it is not measurable on fakes. A step in ENV_SKIPS may also be
# skipped for one of those reasons, which are the machine's, not colocd's
# (not root, no other user, or one that cannot run the interpreter).
STEPS = [
    ("device", False, "pass"),
    ("serve_ready", False, "pass"),
    ("inference_client", False, "pass"),
    ("status_nvml", False, "pass"),
    ("baseline_100", False, "pass"),
    ("grant_pct", False, "pass"),
    ("status_processes", False, "pass"),
    ("throttle_reload", False, "pass"),
    ("revoke_evict", False, "pass"),
    ("daemon_recovery", False, "pass"),
    ("fault", False, "pass"),
    ("fault_containment", True, "skip"),
    ("other_uid_register", False, "skip"),
    ("shutdown", False, "pass"),
]
ENV_SKIPS = {"other_uid_register": ("not root:", "no user nobody", "did not start:")}
GPU_ONLY = {n for n, g, _ in STEPS if g}
FAKE_EXPECT = {n: e for n, _, e in STEPS}


def _eval(expr, names):
    try:
        return eval(expr, {"__builtins__": __builtins__}, names)  # the script's own expressions
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, ZeroDivisionError):
        return None


def _value(v):
    try:
        return json.loads(v)
    except ValueError:
        return v


def cmd_record(a):
    res, name, status = a[0], a[1], a[2]
    if status not in ("pass", "fail", "skip"):
        raise SystemExit("record: status must be pass, fail or skip, got %r" % status)
    rec = {"name": name, "status": status, "gpu_only": name in GPU_ONLY, "figures": {}}
    i = 3
    while i < len(a):
        if a[i] == "--gpu-only":
            rec["gpu_only"] = True
        elif a[i] == "--reason":
            i += 1
            rec["reason"] = a[i]
        else:
            k, _, v = a[i].partition("=")
            rec["figures"][k] = _value(v)
        i += 1
    rec["t"] = round(time.time(), 3)
    with open(os.path.join(res, "steps.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")
    print("== %-20s %s%s" % (name, status.upper(), (": " + rec["reason"]) if rec.get("reason") else ""),
          file=sys.stderr)


def _opts(a, **defaults):
    out, pos = dict(defaults), []
    i = 0
    while i < len(a):
        if a[i].startswith("--"):
            out[a[i][2:].replace("-", "_")] = a[i + 1]
            i += 2
        else:
            pos.append(a[i])
            i += 1
    return out, pos


def status_once():
    colocd = os.environ["COLOCD"]
    try:
        p = subprocess.run([colocd, "status", "--json", "--timeout", "4s"], capture_output=True, text=True, timeout=5)
    except subprocess.TimeoutExpired:
        return None
    if p.returncode != 0:
        return None
    try:
        return json.loads(p.stdout)
    except ValueError:
        return None


def _wait(read, name, o):
    end = time.monotonic() + float(o["timeout"])
    last = None
    while True:
        v = read()
        if v is not None:
            last = v
            if _eval(o["cond"], {name: v}):
                if o.get("save"):
                    core.write_json_atomic(o["save"], v)
                return 0
        if time.monotonic() >= end:
            sys.stderr.write("wait: %s not true within %s s; last %s:\n%s\n"
                             % (o["cond"], o["timeout"], name, json.dumps(last)[:3000]))
            if o.get("save") and last is not None:
                core.write_json_atomic(o["save"], last)
            return 1
        time.sleep(0.25)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_events(path):
    out = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        return None
    return out


def cmd_status_wait(a):
    o, _ = _opts(a, timeout="30")
    return _wait(status_once, "s", o)


def cmd_json_wait(a):
    o, pos = _opts(a, timeout="30")
    return _wait(lambda: read_json(pos[0]), "d", o)


def cmd_events_wait(a):
    o, pos = _opts(a, timeout="30")
    return _wait(lambda: read_events(pos[0]), "ev", o)


def cmd_get(a):
    d = read_json(a[0]) if not a[0].endswith(".jsonl") and not a[0].endswith(".err") else read_events(a[0])
    v = _eval(a[1], {"d": d, "ev": d})
    if v is None:
        return 1
    print(v if isinstance(v, str) else json.dumps(v))
    return 0


def cmd_rate(a):
    """units/s from the worker's own counts and clocks, over SECONDS."""
    path, secs = a[0], float(a[1])
    d1 = read_json(path)
    time.sleep(secs)
    d2 = read_json(path)
    if not d1 or not d2 or d2.get("state") != "running" or d2["t"] <= d1["t"]:
        print(json.dumps({"rate": None, "state": (d2 or {}).get("state")}))
        return 1
    print(json.dumps({"rate": round((d2["units"] - d1["units"]) / (d2["t"] - d1["t"]), 3),
                      "units": d2["units"] - d1["units"], "seconds": round(d2["t"] - d1["t"], 3)}))
    return 0


def cmd_slos(a):
    """From `colocd quote --json` at fixed percentages (a JSON object
    {pct: quote list}): the SLOs that grant the trainer its max, throttle it
    below the grant, and leave no room at all (revoke), for headroom 0.1."""
    q = read_json(a[0])
    p99 = {int(k): v[0]["predictions"][0]["predicted_p99_ms"] for k, v in q.items()}
    solo = next(iter(q.values()))[0]["predictions"][0]["solo_p99_ms"]
    lim = lambda ms: round(ms / 0.9, 3)  # noqa: E731
    out = {"solo_p99_ms": round(solo, 3), "p99_ms": {str(k): round(v, 3) for k, v in sorted(p99.items())},
           "grant": lim(max(p99.values()) * 1.5),
           "throttle": lim((p99[20] + p99[50]) / 2),
           "revoke": lim((solo + min(p99.values())) / 2)}
    print(json.dumps(out))
    return 0


def load_steps(res):
    steps = []
    p = os.path.join(res, "steps.jsonl")
    if os.path.exists(p):
        with open(p) as f:
            steps = [json.loads(l) for l in f if l.strip()]
    return steps


def cmd_report(a):
    res, out = a[0], a[1]
    meta = read_json(os.path.join(res, "meta.json")) or {}
    steps = load_steps(res)
    seen = {s["name"] for s in steps}
    for name, _, _ in STEPS:
        if name not in seen:
            steps.append({"name": name, "status": "fail", "gpu_only": name in GPU_ONLY, "figures": {},
                          "reason": "not run (the script stopped before this step)"})
    counts = {k: sum(1 for s in steps if s["status"] == k) for k in ("pass", "fail", "skip")}
    doc = {"format": FORMAT, "backend": meta.get("backend"), "device": meta.get("device"),
           "started": meta.get("started"), "wall_s": meta.get("wall_s"), "exit": meta.get("exit"),
           "counts": counts, "steps": steps}
    if meta.get("backend") == "fake":
        doc["note"] = ("SYNTHETIC: a dry run against colocd's simulated GPU, the fake MPS control program "
                       "and the harness's fake workers; no figure is a measurement")
    core.write_json_atomic(os.path.join(out, "results.json"), doc)
    lines = ["# colocd end to end: %s" % ("DRY RUN on fakes (synthetic)" if meta.get("backend") == "fake"
                                          else "on %s" % ((meta.get("device") or {}).get("name") or "a GPU")), "",
             "backend `%s`, started %s, %s s, %d pass, %d fail, %d skip" % (
                 meta.get("backend"), meta.get("started"), meta.get("wall_s"), counts["pass"], counts["fail"],
                 counts["skip"]), "",
             "| step | result | GPU only | figures | reason |", "|---|---|---|---|---|"]
    for s in steps:
        figs = ", ".join("%s=%s" % (k, json.dumps(v)) for k, v in s.get("figures", {}).items())
        lines.append("| %s | %s | %s | %s | %s |" % (s["name"], s["status"], "yes" if s.get("gpu_only") else "",
                                                  figs.replace("|", "/"), (s.get("reason") or "").replace("|", "/")))
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


def cmd_check(a):
    """The dry run's assertions: every step recorded once, as FAKE_EXPECT says."""
    steps = load_steps(a[0])
    by = {}
    for s in steps:
        by.setdefault(s["name"], []).append(s)
    bad = []
    for name, _, want in STEPS:
        got = by.get(name)
        if not got:
            bad.append("%s: not recorded" % name)
            continue
        if len(got) > 1:
            bad.append("%s: recorded %d times" % (name, len(got)))
        s = got[-1]
        if s["status"] == "skip" and any(r in (s.get("reason") or "") for r in ENV_SKIPS.get(name, ())):
            print("skipped on this machine: %s: %s" % (name, s.get("reason")), file=sys.stderr)
        elif want == "pass" and s["status"] != "pass":
            bad.append("%s: %s (%s)" % (name, s["status"], s.get("reason")))
        elif want == "skip" and s["status"] == "pass":
            bad.append("%s: passes on fakes now: make it 'pass' in e2e_util.STEPS" % name)
        elif want == "skip" and (s["status"] != "skip" or "not measurable on fakes" not in (s.get("reason") or "")
                                 or not s.get("figures")):
            bad.append("%s: want a skip 'not measurable on fakes' with the figures it got, got %s (%s)"
                       % (name, s["status"], s.get("reason")))
    extra = set(by) - set(FAKE_EXPECT)
    if extra:
        bad.append("steps not in e2e_util.STEPS: %s" % ", ".join(sorted(extra)))
    for b in bad:
        print("DRY RUN FAILED: " + b, file=sys.stderr)
    return 1 if bad else 0


COMMANDS = {"record": cmd_record, "status-wait": cmd_status_wait, "json-wait": cmd_json_wait,
            "events-wait": cmd_events_wait, "get": cmd_get, "rate": cmd_rate, "slos": cmd_slos,
            "report": cmd_report, "check": cmd_check}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]) or 0)
