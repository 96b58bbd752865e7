#!/usr/bin/env python3
"""The predictor's accuracy on a measurements file, leave-one-workload-out.

For each workload (by default each training workload: the records that share
one set of training profiles), calibrate colocd on every other record
(`colocd calibrate --no-cv`), then predict the left-out records with that
calibration (`colocd predict`, the same profiles, mode, rate, percentages,
requests and seed that calibrate simulates). Print one row per record:
measured and predicted latency mean and p99 (arrival -> completion), their
errors, and the training iteration time; then the MAPE per mode. Nothing is
fitted on the records it scores.

The in-sample fit over all records (and, with --builtin-cv, colocd's own
cross-validation, leave-one-workload-out) is printed for reference.

  python3 accuracy.py --colocd /tmp/colocd --measurements testdata/gpu/h200/measurements.json

Exit status: 0 when the table was produced (whatever the error), 1 on a
failure to run colocd or read the file.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import core  # noqa: E402


class ColocdError(Exception):
    pass


def run_colocd(argv):
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise ColocdError("%s: exit %d\n%s" % (" ".join(argv[:3]), p.returncode, p.stderr.strip()))
    return p.stdout


def load_doc(path):
    """The measurements with every profile reference made absolute (inline
    profiles written to files), and each record's profile names."""
    path = os.path.abspath(path)
    with open(path) as f:
        doc = json.load(f)
    if doc.get("format") != core.MEASUREMENTS_FORMAT:
        raise ValueError("%s: not a %s file" % (path, core.MEASUREMENTS_FORMAT))
    base = os.path.dirname(path)
    tmp = tempfile.mkdtemp(prefix="colocd-accuracy-inline-")
    names = {}

    def resolve(ref, label):
        if isinstance(ref, dict):
            p = os.path.join(tmp, "%s.json" % label)
            core.write_json_atomic(p, ref)
            return p, ref.get("name", label)
        p = ref if os.path.isabs(ref) else os.path.join(base, ref)
        if p not in names:
            with open(p) as f:
                names[p] = json.load(f).get("name", "")
        return p, names[p]

    for i, r in enumerate(doc["records"]):
        r["inference"], r["_inference_name"] = resolve(r["inference"], "r%d-inference" % i)
        tr = []
        r["_training_names"] = []
        for j, t in enumerate(r.get("training") or []):
            p, n = resolve(t, "r%d-training%d" % (i, j))
            tr.append(p)
            r["_training_names"].append(n)
        r["training"] = tr
    doc["_tmp"] = tmp
    return doc


def clean_record(r):
    return {k: v for k, v in r.items() if not k.startswith("_")}


def write_subset(doc, records, path):
    sub = {"format": doc["format"], "source": "subset of: %s" % doc.get("source", ""), "records": [clean_record(r) for r in records]}
    if doc.get("device"):
        sub["device"] = doc["device"]
    core.write_json_atomic(path, sub)


def group_key(r, by):
    if by == "training":
        return core.workload_key(r["_training_names"]) or "(no training)"
    if by == "inference":
        return r["_inference_name"]
    return r["name"]


# Arrival seeds per record: calibrate's default, passed to it explicitly;
# predict_mean averages the same seeds the same way.
SEEDS = 3


def calibrate(colocd, meas_path, out_path, requests, seed, cv, seeds=SEEDS, extra=()):
    argv = [colocd, "calibrate", "--measurements", meas_path, "--out", out_path, "--json", "--seed", str(seed),
            "--seeds", str(seeds)] + list(extra)
    if requests:
        argv += ["--requests", str(requests)]
    if not cv:
        argv.append("--no-cv")
    return json.loads(run_colocd(argv))


def predict_mean(colocd, r, cal_path, requests, seed, sms, seeds=SEEDS):
    """colocd predict for one record as calibrate simulates it: the mean
    over SEEDS seeds from the record's (or the run's) seed upwards, summed
    in calibrate's order so that the figures agree to the last bit. The
    intervals are those of the record's own seed (its arrivals, its
    requests: what one such window could show)."""
    base = r.get("seed") or seed
    preds = [predict(colocd, dict(r, seed=base + k), cal_path, requests, seed, sms) for k in range(seeds)]
    out = json.loads(json.dumps(preds[0]))
    n = float(seeds)
    for q in ("latency_ms", "service_ms"):
        for k in core.PERCENTILE_KEYS:
            acc = 0.0
            for p in preds:
                acc += p["inference"][q][k] / n
            out["inference"][q][k] = acc
    for j, t in enumerate(out["training"]):
        its = [p["training"][j].get("iteration_ms") for p in preds]
        if any(v is None for v in its):
            continue
        acc = 0.0
        for v in its:
            acc += v
        t["iteration_ms"] = acc / n
    return out


# The level of the intervals whose coverage of the measured values is
# reported (the issue of trust: a 90 % interval should hold 90 % of them).
CONFIDENCE = 0.9


def predict(colocd, r, cal_path, requests, seed, sms):
    """colocd predict for one record with one seed, its intervals at
    CONFIDENCE."""
    argv = [colocd, "predict", "--inference", r["inference"], "--confidence", repr(CONFIDENCE)]
    for t in r["training"]:
        argv += ["--training", t]
    argv += ["--mode", r["mode"], "--rate", repr(float(r["rate_rps"])),
             "--requests", str(r.get("requests") or requests or 2000), "--seed", str(r.get("seed") or seed), "--json"]
    if cal_path:  # else the preset for the profile's GPU or the built-in default
        argv += ["--calibration", cal_path]
    if r["mode"] == "mps":
        for _ in r["training"]:
            argv += ["--pct", "%r" % float(r["training_pct"])]
        if r.get("inference_pct"):
            argv += ["--inference-pct", "%r" % float(r["inference_pct"])]
        if sms:
            argv += ["--sms", str(int(sms))]
    return json.loads(run_colocd(argv))


def metrics_of(r):
    """Every measured value of a record: [(field, measured)], calibrate's order."""
    m = r["measured"]
    out = []
    for q in ("latency_ms", "service_ms"):
        for k in core.PERCENTILE_KEYS:
            if k in (m.get(q) or {}):
                out.append(("%s.%s" % (q, k), float(m[q][k])))
    it = m.get("training_iteration_ms")
    its = it if isinstance(it, list) else ([] if it is None else [it])
    for j, v in enumerate(its):
        out.append(("training_iteration_ms[%d]" % j, float(v)))
    return out


def predicted_value(pred, field):
    if field.startswith("training_iteration_ms["):
        j = int(field[len("training_iteration_ms["):-1])
        t = pred["training"][j] if j < len(pred["training"]) else {}
        return t.get("iteration_ms")
    q, k = field.split(".")
    return pred["inference"][q][k]


def predicted_interval(pred, field):
    """The interval colocd gave for a latency or service figure, or None."""
    if field.startswith("training_iteration_ms["):
        return None
    q, k = field.split(".")
    iv = (pred["inference"].get(q + "_interval") or {}).get(k)
    return iv if isinstance(iv, list) and len(iv) == 2 else None


def rel_err(pred, meas):
    return None if pred is None else (pred - meas) / meas


def mape(errs):
    errs = [abs(e) for e in errs if e is not None]
    return sum(errs) / len(errs) if errs else None


def evaluate(doc, colocd, by="training", requests=None, seed=1, builtin_cv=False, check=False, workdir=None,
             progress=None, seeds=SEEDS, solo=None, calibrate_args=(), fold_cv=False, no_fit=False):
    """Run the leave-one-group-out evaluation (with no_fit: predict every
    record with colocd's own calibration for the device, fitting nothing);
    returns a result dict."""
    say = progress or (lambda s: None)
    recs = doc["records"]
    sms = (doc.get("device") or {}).get("sms") or 0
    res = {"by": by, "requests": requests or 2000, "seed": seed, "source": doc.get("source"),
           "records": [], "folds": [], "fold_cv": fold_cv, "no_fit": no_fit}
    if no_fit:
        # Nothing is fitted, the naive baseline's constants included.
        preds = {}
        for i, r in enumerate(recs):
            say("record %d/%d: %s" % (i + 1, len(recs), r["name"]))
            try:
                preds[i] = {"prediction": predict_mean(colocd, r, None, requests, seed, sms, seeds)}
            except ColocdError as e:
                preds[i] = {"error": str(e)}
        return _score(res, recs, preds, None)
    work = workdir or tempfile.mkdtemp(prefix="colocd-accuracy-")

    full_path = os.path.join(work, "all.measurements.json")
    write_subset(doc, recs, full_path)
    say("calibrating on all %d records%s" % (len(recs), " (with colocd's own cross-validation)" if builtin_cv else ""))
    full = calibrate(colocd, full_path, os.path.join(work, "all.calibration.json"), requests, seed, builtin_cv, seeds,
                     calibrate_args)
    res["calibrate_args"] = list(calibrate_args)
    res["full_fit"] = {"timeslice": full.get("timeslice"), "mps": (full.get("mps") or {}).get("coefficients"),
                       "timeslice_fit": _fit_summary(full.get("fit")),
                       "mps_fit": _fit_summary((full.get("mps") or {}).get("fit"))}

    groups = {}
    for i, r in enumerate(recs):
        groups.setdefault(group_key(r, by), []).append(i)
    preds = {}
    for gi, (key, idx) in enumerate(sorted(groups.items())):
        rest = [r for i, r in enumerate(recs) if i not in idx]
        fold = {"left_out": key, "records": len(idx), "trained_on": len(rest)}
        res["folds"].append(fold)
        if not rest:
            fold["error"] = "no other record to calibrate on"
            continue
        mp = os.path.join(work, "fold%d.measurements.json" % gi)
        cp = os.path.join(work, "fold%d.calibration.json" % gi)
        write_subset(doc, rest, mp)
        say("fold %d/%d: leave out %s (%d records), calibrate on %d" % (gi + 1, len(groups), key, len(idx), len(rest)))
        try:
            cal = calibrate(colocd, mp, cp, requests, seed, fold_cv, seeds, calibrate_args)
        except ColocdError as e:
            fold["error"] = str(e)
            continue
        fold["timeslice"] = cal.get("timeslice")
        fold["mps"] = (cal.get("mps") or {}).get("coefficients")
        fitted = {"timeslice": "timeslice" in cal and cal.get("fit") is not None,
                  "mps": "mps" in cal and (cal.get("mps") or {}).get("fit") is not None}
        for i in idx:
            r = recs[i]
            if not fitted[r["mode"]]:
                preds[i] = {"error": "no %s record left to calibrate on" % r["mode"]}
                continue
            try:
                preds[i] = {"prediction": predict_mean(colocd, r, cp, requests, seed, sms, seeds)}
            except ColocdError as e:
                preds[i] = {"error": str(e)}

    if check:
        res["consistency"] = consistency(doc, colocd, full, os.path.join(work, "all.calibration.json"), requests,
                                         seed, sms, seeds)

    return _score(res, recs, preds, baseline(doc, solo, by) if solo else None)


def _score(res, recs, preds, base):
    """Fill res with each record's errors against its predictions (and the
    baseline's, when given) and the summaries."""
    for i, r in enumerate(recs):
        row = {"name": r["name"], "mode": r["mode"], "group": group_key(r, res["by"]), "rate_rps": r["rate_rps"],
               "training_pct": r.get("training_pct"), "metrics": []}
        p = preds.get(i, {"error": "not predicted"})
        if "error" in p:
            row["error"] = p["error"]
        for field, meas in metrics_of(r):
            pv = predicted_value(p["prediction"], field) if "prediction" in p else None
            m = {"field": field, "measured": meas, "predicted": pv, "error": rel_err(pv, meas)}
            iv = predicted_interval(p["prediction"], field) if "prediction" in p else None
            if iv:
                m["interval"], m["covered"] = iv, iv[0] <= meas <= iv[1]
            if base is not None:
                bv = base.get(i, {}).get(field)
                m["baseline"], m["baseline_error"] = bv, rel_err(bv, meas)
            row["metrics"].append(m)
        res["records"].append(row)
    res["mape"] = summarize_errors(res["records"])
    res["coverage"] = coverage(res["records"])
    if base is not None:
        res["baseline_mape"] = summarize_errors(res["records"], key="baseline_error")
    return res


def load_solo(meas_path):
    """The harness's solo figures beside a measurements file (run.json), or
    None: {"inference": {(name, rate): {"latency_ms": {...}, "service_ms":
    {...}}}, "training": {name: iteration mean ms}}."""
    path = os.path.join(os.path.dirname(os.path.abspath(meas_path)), "run.json")
    try:
        with open(path) as f:
            run = json.load(f)
    except (OSError, ValueError):
        return None
    out = {"inference": {}, "training": {}}
    for name, s in (run.get("solo") or {}).items():
        if "iteration_ms" in s:
            out["training"][name] = float(s["iteration_ms"]["mean"])
        for w in (s.get("at_load") or {}).values():
            out["inference"][(name, round(float(w["rate_rps"]), 3))] = w
    return out


def solo_reference(solo, r, field):
    """The solo measurement a naive prediction of `field` scales, or None."""
    if field.startswith("training_iteration_ms["):
        j = int(field[len("training_iteration_ms["):-1])
        names = r.get("_training_names") or []
        return solo["training"].get(names[j]) if j < len(names) else None
    w = solo["inference"].get((r["_inference_name"], round(float(r["rate_rps"]), 3)))
    if not w:
        return None
    q, k = field.split(".")
    return (w.get(q) or {}).get(k)


def baseline(doc, solo, by):
    """The naive baseline, folded exactly like the predictor: a record's value
    is its solo measurement times one constant per mode and field, the
    median of measured / solo over the other folds' records. Returns
    {record index: {field: predicted}}."""
    recs = doc["records"]
    out = {}
    for key in sorted({group_key(r, by) for r in recs}):
        train = [r for r in recs if group_key(r, by) != key]
        ratios = {}
        for r in train:
            for field, meas in metrics_of(r):
                ref = solo_reference(solo, r, field)
                if ref:
                    f = "training_iteration_ms" if field.startswith("training_iteration_ms") else field
                    ratios.setdefault((r["mode"], f), []).append(meas / ref)
        for i, r in enumerate(recs):
            if group_key(r, by) != key:
                continue
            out[i] = {}
            for field, _ in metrics_of(r):
                ref = solo_reference(solo, r, field)
                f = "training_iteration_ms" if field.startswith("training_iteration_ms") else field
                rs = sorted(ratios.get((r["mode"], f), []))
                k = core.quantile_sorted(rs, 0.5) if rs else None
                out[i][field] = None if ref is None or k is None else ref * k
    return out


def coverage(rows):
    """Per mode, for latency p99 and mean: how many measured values the
    predicted interval (at CONFIDENCE) holds, how many lie above it (the
    dangerous side: the prediction too optimistic), and the intervals'
    median width relative to the prediction, (upper - lower) / predicted:
    coverage bought with width shows there."""
    out = {}
    for mode in core.MODES:
        d = {}
        for f in ("latency_ms.p99", "latency_ms.mean"):
            ms = [m for r in rows if r["mode"] == mode for m in r["metrics"] if m["field"] == f and "covered" in m]
            if ms:
                widths = sorted((m["interval"][1] - m["interval"][0]) / m["predicted"] for m in ms if m["predicted"])
                d[f] = {"n": len(ms), "covered": sum(1 for m in ms if m["covered"]),
                        "above": sum(1 for m in ms if m["measured"] > m["interval"][1]),
                        "median_width": core.quantile_sorted(widths, 0.5) if widths else None}
        if d:
            out[mode] = d
    return out


def _fit_summary(fit):
    if not fit:
        return None
    return {k: fit.get(k) for k in ("records", "metrics", "mape", "cv_mape", "cv", "unidentified")}


def consistency(doc, colocd, full, cal_path, requests, seed, sms, seeds=SEEDS):
    """The largest relative difference between calibrate's in-sample
    predictions and colocd predict's for the same calibration: ~0 when this
    script simulates each record exactly as calibrate does."""
    ins = {}
    for fit in (full.get("fit"), (full.get("mps") or {}).get("fit")):
        for pr in (fit or {}).get("per_record") or []:
            for m in pr["metrics"]:
                ins[(pr["name"], m["field"])] = m["predicted"]
    worst = 0.0
    n = 0
    for r in doc["records"]:
        pred = predict_mean(colocd, r, cal_path, requests, seed, sms, seeds)
        for field, _ in metrics_of(r):
            a, b = ins.get((r["name"], field)), predicted_value(pred, field)
            if a is None or b is None:
                continue
            worst = max(worst, abs(a - b) / max(abs(a), 1e-12))
            n += 1
    return {"compared": n, "max_rel_diff": worst}


def summarize_errors(rows, key="error"):
    out = {}
    for mode in core.MODES:
        rs = [r for r in rows if r["mode"] == mode]
        if not rs:
            continue
        sel = {"all": lambda f: True, "latency_ms.mean": lambda f: f == "latency_ms.mean",
               "latency_ms.p99": lambda f: f == "latency_ms.p99",
               "service_ms.mean": lambda f: f == "service_ms.mean",
               "training_iteration_ms": lambda f: f.startswith("training_iteration_ms")}
        d = {"records": len(rs), "predicted": sum(1 for r in rs if "error" not in r)}
        for k, f in sel.items():
            errs = [m[key] for r in rs for m in r["metrics"] if f(m["field"]) and m.get(key) is not None]
            d[k] = {"mape": mape(errs), "n": len(errs)}
        out[mode] = d
    return out


def fmt_pct(e):
    return "—" if e is None else "%+.1f %%" % (100 * e)


def fmt_ms(v):
    return "—" if v is None else "%.3f" % v


def table(res, markdown=False):
    # The mean, or the p50 where no record measured a mean (some public
    # sources publish percentiles only).
    centre = "mean"
    if not any(x["field"] == "latency_ms.mean" for r in res["records"] for x in r["metrics"]):
        centre = "p50"
    cols = ["record", "mode", "meas " + centre, "pred " + centre, "err", "meas p99", "pred p99", "err",
            "meas iter", "pred iter", "err"]
    rows = []
    for r in res["records"]:
        m = {x["field"]: x for x in r["metrics"]}

        def trip(f):
            x = m.get(f)
            if not x:
                return ["—", "—", "—"]
            return [fmt_ms(x["measured"]), fmt_ms(x["predicted"]), fmt_pct(x["error"])]
        mode = r["mode"] if r["mode"] == "timeslice" else "mps %g%%" % r["training_pct"]
        rows.append([r["name"], mode] + trip("latency_ms." + centre) + trip("latency_ms.p99") +
                    trip("training_iteration_ms[0]"))
    if markdown:
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    w = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    fmt = "  ".join("%%-%ds" % x if i < 2 else "%%%ds" % x for i, x in enumerate(w))
    return "\n".join([fmt % tuple(cols)] + [fmt % tuple(r) for r in rows])


def report(res, markdown=False):
    out = []
    if res.get("calibrate_args"):
        out.append("colocd calibrate %s" % " ".join(res["calibrate_args"]))
    if res.get("no_fit"):
        out.append("no fit: each record predicted with colocd's own calibration for the device (its preset, else "
                   "the built-in default), nothing fitted on these records; each record simulated with its own "
                   "requests and seed (else %d requests, seed %d)" % (res["requests"], res["seed"]))
    else:
        out.append("leave-one-%s-out: each record predicted by a calibration that never saw its %s; each record "
                   "simulated with its own requests and seed (else %d requests, seed %d)" % (
                       res["by"], res["by"] if res["by"] != "record" else "record", res["requests"], res["seed"]))
    if res.get("source"):
        out.append("measurements: %s" % res["source"])
    out.append("")
    out.append(table(res, markdown))
    errs = [r for r in res["records"] if r.get("error")]
    if errs:
        out.append("")
        out.append("not predicted: " + "; ".join("%s (%s)" % (r["name"], r["error"].splitlines()[0]) for r in errs))
    out.append("")
    out.append("MAPE, %s predictions (Parallax reports 4.33 %% time-slicing, 6.12 %% MPS):" % (
        "unfitted" if res.get("no_fit") else "left-out"))
    for mode, d in res["mape"].items():
        out.append("  %-9s %d/%d records predicted; %s" % (mode, d["predicted"], d["records"], _mape_parts(d)))
    if res.get("coverage"):
        out.append("%g %% intervals (of each record's own seed) holding the measured value; in brackets, above "
                   "the interval, and the median width as a share of the prediction:" % (100 * CONFIDENCE))
        for mode, d in res["coverage"].items():
            out.append("  %-9s %s" % (mode, ", ".join("%s %d/%d (%d; width %s)" % (
                f, c["covered"], c["n"], c["above"], _pct(c.get("median_width"))) for f, c in d.items())))
    if res.get("baseline_mape"):
        out.append("naive baseline (solo measurement x one constant per mode and field, the median ratio of the "
                   "other folds), same folds:")
        for mode, d in res["baseline_mape"].items():
            out.append("  %-9s %s" % (mode, _mape_parts(d)))
    ff = res.get("full_fit")
    if ff is None:
        return "\n".join(out)
    out.append("")
    out.append("calibrated on all records (reference, in-sample):")
    if ff.get("timeslice"):
        ts = ff["timeslice"]
        f = ff.get("timeslice_fit") or {}
        out.append("  timeslice: slice %.1f us, switch %.1f us, hold-over %.1f us; MAPE %s%s%s" % (
            ts["slice_us"], ts["switch_us"], ts["holdover_us"], _pct(f.get("mape")),
            "; %s %s" % (f.get("cv"), _pct(f.get("cv_mape"))) if f.get("cv_mape") is not None else "",
            "; not identified: %s" % ", ".join(f["unidentified"]) if f.get("unidentified") else ""))
    if ff.get("mps"):
        c = ff["mps"]
        f = ff.get("mps_fit") or {}
        out.append("  mps: dram %.4f, l2 %.4f, kernels %.4f; MAPE %s%s" % (
            c.get("dram", 0), c.get("l2", 0), c.get("kernels", 0), _pct(f.get("mape")),
            "; %s %s" % (f.get("cv"), _pct(f.get("cv_mape"))) if f.get("cv_mape") is not None else ""))
    if res.get("consistency"):
        c = res["consistency"]
        out.append("  consistency: colocd predict reproduces calibrate's in-sample values within %.2g (%d values)"
                   % (c["max_rel_diff"], c["compared"]))
    return "\n".join(out)


def _mape_parts(d):
    parts = []
    for k in ("all", "latency_ms.mean", "latency_ms.p99", "service_ms.mean", "training_iteration_ms"):
        v = d[k]
        if v["n"]:
            parts.append("%s %.2f %% (%d)" % (k, 100 * v["mape"], v["n"]))
    return ", ".join(parts)


def _pct(v):
    return "—" if v is None else "%.2f %%" % (100 * v)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--measurements", required=True, help="a colocd.measurements/v1 file")
    ap.add_argument("--colocd", default=shutil.which("colocd") or "colocd", help="the colocd binary")
    ap.add_argument("--by", choices=["training", "inference", "record"], default="training",
                    help="what one fold leaves out (default: one training workload)")
    ap.add_argument("--requests", type=int, default=None, help="simulated requests per record (default: colocd's, 2000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seeds", type=int, default=SEEDS, help="arrival seeds per record, as colocd calibrate --seeds (default %(default)s)")
    ap.add_argument("--builtin-cv", action="store_true", help="also run colocd calibrate's own cross-validation")
    ap.add_argument("--fold-cv", action="store_true",
                    help="calibrate each fold as colocd calibrate does by default, with its own cross-validation, "
                         "so that the intervals are the ones users get (slower; default: --no-cv in the folds)")
    ap.add_argument("--check", action="store_true",
                    help="check that colocd predict reproduces calibrate's in-sample values")
    ap.add_argument("--calibrate-arg", action="append", default=[], metavar="ARG",
                    help="pass ARG to every colocd calibrate (repeatable; e.g. --calibrate-arg=--no-prior): "
                         "how a calibration default is compared by held-out error")
    ap.add_argument("--no-fit", action="store_true",
                    help="fit nothing: predict every record with colocd's own calibration for the device (a "
                         "source too small to fold, such as one public run)")
    ap.add_argument("--json", default=None, help="write the full result as JSON to this file")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--workdir", default=None, help="keep the fold files here (default: a temporary directory)")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.no_fit and (a.check or a.fold_cv or a.builtin_cv or a.calibrate_arg):
        sys.stderr.write("accuracy: --no-fit fits nothing, so --check, --fold-cv, --builtin-cv and --calibrate-arg "
                         "do not apply\n")
        return 2
    try:
        doc = load_doc(a.measurements)
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write("accuracy: %s\n" % e)
        return 1
    progress = None if a.quiet else (lambda s: sys.stderr.write("accuracy: %s\n" % s))
    try:
        res = evaluate(doc, a.colocd, by=a.by, requests=a.requests, seed=a.seed, builtin_cv=a.builtin_cv,
                       check=a.check, workdir=a.workdir, progress=progress, seeds=a.seeds,
                       solo=load_solo(a.measurements), calibrate_args=a.calibrate_arg, fold_cv=a.fold_cv,
                       no_fit=a.no_fit)
    except (ColocdError, OSError) as e:
        sys.stderr.write("accuracy: %s\n" % e)
        return 1
    finally:
        shutil.rmtree(doc["_tmp"], ignore_errors=True)
    print(report(res, a.markdown))
    if a.json:
        core.write_json_atomic(a.json, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
