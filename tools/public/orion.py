#!/usr/bin/env python3
"""Convert the public Orion artifact's V100 MPS measurement into colocd's formats.

Orion (Strati, Ma, Klimovic, EuroSys 2024; github.com/eth-easl/orion, MIT)
publishes, for its artifact evaluation on a V100-16GB, kernel files made from
Nsight Compute profiles (one row per kernel or grouped operator: Name,
Profile, Memory_footprint, SM_usage, Duration in ns) and one log of its MPS
baseline: ResNet-50 inference (batch 4, Poisson arrivals at 30 req/s) beside
ResNet-50 training (batch 32), both clients at 100 %.

This script reads the copies in testdata/public/orion-v100/raw and writes
profiles/*.json (colocd.profile/v1) and measurements.json
(colocd.measurements/v1) beside them. --check regenerates them in memory and
fails if the committed files differ.

The mapping, kernel by kernel:
  dur_us    Duration / 1000
  sm        min(SM_usage, SMS) / SMS, at least one SM: SM_usage is the SMs the
            kernel's blocks would fill at once (Orion's get_num_blocks.py:
            blocks over the blocks an SM holds)
  waves     max(1, SM_usage / SMS): the rounds of blocks on SMS SMs
  gap_us    0: the files carry no time between kernels
Orion's files carry no occupancy and no DRAM or L2 figures: those keys are
left out (unknown), so colocd estimates DRAM and L2 from the kernel names and
charges no head-of-line wait (docs/predictor.md). Its Profile column (0
memory-bound, 1 compute-bound, -1 unknown) is not a colocd key.
"""

import argparse
import csv
import io
import json
import math
import os
import sys

SMS = 80  # Tesla V100: 80 SMs
DEVICE = {"name": "Tesla V100-SXM2-16GB", "sms": SMS}
SOURCE = ("Orion artifact (github.com/eth-easl/orion, commit aded65d, MIT): "
          "artifact_evaluation/fig7, MPS baseline on one V100-16GB; converted by tools/public/orion.py")
COLUMNS = ["Name", "Profile", "Memory_footprint", "SM_usage", "Duration"]
MAX_KERNELS = 100000
MAX_SM_USAGE = SMS * 10**9  # colocd's profiles allow at most 10⁹ waves

# The artifact's files (raw/), what each becomes, and the run they belong to.
INFERENCE = ("resnet50_4_fwd", "resnet50-infer-b4", "inference")
TRAINING = ("resnet50_32_fb1", "resnet50-train-b32", "training")
LOG = "eval-resnet50train-resnet50-1.log.json"
RATE_RPS = 30.0  # the log's config: resnet50 (eval) request_rate 30, Poisson
WARM_UP_ITERATIONS = 10  # Orion's train_imagenet.py: throughput counts iterations after these


class ConvertError(Exception):
    pass


def read_kernels(text, where):
    """The rows of an Orion kernel file: [(name, sm_usage, duration_ns)]."""
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise ConvertError("%s: not CSV: %s" % (where, e)) from None
    header = rows[0] if rows else None
    if header != COLUMNS:
        raise ConvertError("%s: header %r, want %r" % (where, header, COLUMNS))
    out = []
    for n, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(COLUMNS):
            raise ConvertError("%s line %d: %d fields, want %d (%s)" % (where, n, len(row), len(COLUMNS),
                                                                     ", ".join(COLUMNS)))
        if len(out) >= MAX_KERNELS:
            raise ConvertError("%s: more than %d kernels" % (where, MAX_KERNELS))
        name = row[0].strip()
        try:
            sm = int(row[3])
        except ValueError:
            raise ConvertError("%s line %d: SM_usage %r is not an integer" % (where, n, row[3])) from None
        try:
            dur = float(row[4])
        except ValueError:
            raise ConvertError("%s line %d: Duration %r is not a number of ns" % (where, n, row[4])) from None
        if not 0 <= sm <= MAX_SM_USAGE:
            raise ConvertError("%s line %d: SM_usage %d, want 0 to %d (10⁹ waves)" % (where, n, sm, MAX_SM_USAGE))
        if not (0 <= dur <= 3.6e12):
            raise ConvertError("%s line %d: Duration %r ns, want 0 to 3.6e12 (one hour)" % (where, n, row[4]))
        out.append((name, sm, dur))
    if not out:
        raise ConvertError("%s: no kernels" % where)
    if sum(d for _, _, d in out) <= 0:
        raise ConvertError("%s: the kernels' durations add up to 0" % where)
    return out


def profile(kernels, name, kind):
    ops = []
    for kname, sm, dur in kernels:
        ops.append({"name": kname, "dur_us": round(dur / 1000.0, 6), "gap_us": 0,
                    "sm": round(max(1, min(sm, SMS)) / SMS, 6), "waves": round(max(1.0, sm / SMS), 6)})
    busy = sum(o["dur_us"] for o in ops)
    return {"format": "colocd.profile/v1", "name": name, "kind": kind, "device": DEVICE, "ops": ops,
            "notes": ["converted from Orion's kernel file by tools/public/orion.py: no occupancy, DRAM, L2 "
                      "or gaps in the source (%d kernels, %.3f ms of kernel time)" % (len(ops), busy / 1000)]}


def measurements(log, where):
    def num(key):
        v = log.get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not (v > 0 and math.isfinite(v)):
            raise ConvertError("%s: %s is %r, want a finite number > 0" % (where, key, v))
        return float(v)

    latency = {k: round(num("%s-latency-0" % k), 4) for k in ("p50", "p90", "p95", "p99")}
    if num("iterations-1") != int(log["iterations-1"]):
        raise ConvertError("%s: iterations-1 is %r, want a whole number" % (where, log["iterations-1"]))
    iters = num("iterations-1") - WARM_UP_ITERATIONS - 1  # Orion counts (batch_idx - warm_up) / duration
    if iters <= 0:
        raise ConvertError("%s: iterations-1 is %r, want more than %d" % (where, log.get("iterations-1"),
                                                                          WARM_UP_ITERATIONS + 1))
    iteration_ms = round(1000.0 * num("duration-1") / iters, 4)
    return {
        "format": "colocd.measurements/v1",
        "source": SOURCE,
        "device": DEVICE,
        "records": [{
            "name": "%s+%s@mps100,%grps" % (INFERENCE[1], TRAINING[1], RATE_RPS),
            "mode": "mps",
            "inference": "profiles/%s.json" % INFERENCE[1],
            "training": ["profiles/%s.json" % TRAINING[1]],
            "rate_rps": RATE_RPS,
            "training_pct": 100,
            "measured": {"latency_ms": latency, "training_iteration_ms": iteration_ms},
        }],
    }


def convert(data_dir):
    """{relative path: JSON text} for everything the conversion writes."""
    raw = os.path.join(data_dir, "raw")
    out = {}
    for base, name, kind in (INFERENCE, TRAINING):
        path = os.path.join(raw, base)
        with open(path, encoding="utf-8") as f:
            kernels = read_kernels(f.read(), path)
        out["profiles/%s.json" % name] = profile(kernels, name, kind)
    path = os.path.join(raw, LOG)
    with open(path, encoding="utf-8") as f:
        try:
            log = json.load(f)
        except ValueError as e:
            raise ConvertError("%s: %s" % (path, e)) from None
    if not isinstance(log, dict):
        raise ConvertError("%s: want a JSON object" % path)
    out["measurements.json"] = measurements(log, path)
    return {k: json.dumps(v, indent=1, ensure_ascii=False) + "\n" for k, v in out.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "testdata", "public", "orion-v100"),
                    help="the folder with raw/ (default: testdata/public/orion-v100)")
    ap.add_argument("--check", action="store_true", help="fail if the committed files differ from a fresh conversion")
    args = ap.parse_args(argv)
    try:
        files = convert(args.data)
    except (ConvertError, OSError) as e:
        print("orion: %s" % e, file=sys.stderr)
        return 1
    stale = []
    for rel, text in sorted(files.items()):
        path = os.path.join(args.data, rel)
        if args.check:
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text:
                        stale.append(rel)
            except OSError:
                stale.append(rel)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print("wrote %s" % path)
    if stale:
        print("orion: %s differ from a fresh conversion; run python3 tools/public/orion.py" % ", ".join(stale),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
