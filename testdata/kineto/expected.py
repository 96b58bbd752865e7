#!/usr/bin/env python3
"""Independent expectations for the Kineto importer tests (predictor/kineto_test.go).

Reads the traces in this directory with Python's json module (timestamps as
Decimal, so that 16-digit microsecond timestamps keep their nanoseconds) and
writes expected.json: for each case, the unit the importer must pick and the
raw figures of the kernels in it.

The rules restated here on purpose, without the Go code:
  * kernels are events with cat "kernel" and ph "X"; other GPU work
    (memcpy, memset) is not counted;
  * a kernel belongs to an annotation when the start of its launching CPU event
    (cat "cuda_runtime" or "cuda_driver", same args.correlation) lies in the
    annotation's [ts, ts+dur]; without a launch event, the kernel's own ts;
  * ProfilerStep#N annotations: the requested step, else the median-length
    step (sorted by dur, then ts; index (n-1)//2); no steps: the whole trace;
  * --annotation TEXT: user_annotation events whose name contains TEXT, the
    median-length one;
  * span = first kernel start to last kernel end; busy = length of the union
    of the kernel intervals (what the ops' dur_us add up to);
  * max_ops N: the first N kernels in (start, end, file order) order.

Run: python3 testdata/kineto/expected.py   (rewrites expected.json)
"""

import decimal
import gzip
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
NS = decimal.Decimal("0.001")

CASES = [
    {"name": "v100 default median step", "trace": "v100-training-5steps.json.gz"},
    {"name": "v100 step 102", "trace": "v100-training-5steps.json.gz", "step": 102},
    {"name": "multistream default step", "trace": "multistream-training-2steps.json.gz"},
    {"name": "a100 whole trace", "trace": "a100-small-benchmark.json.gz"},
    {"name": "v100 annotation DDP forward", "trace": "v100-training-5steps.json.gz",
     "annotation": "DistributedDataParallel.forward"},
    {"name": "a100 annotation measure forward", "trace": "a100-small-benchmark.json.gz",
     "annotation": "measure|forward"},
    {"name": "v100 first 200 ops of median step", "trace": "v100-training-5steps.json.gz",
     "max_ops": 200},
]


def ns(v):
    """Microseconds (int, float text as Decimal) to integer nanoseconds, half away from zero."""
    d = decimal.Decimal(v) if not isinstance(v, decimal.Decimal) else v
    q = d.quantize(NS, rounding=decimal.ROUND_HALF_UP)
    return int(q * 1000)


def load(path):
    with gzip.open(path, "rb") as f:
        return json.load(f, parse_float=decimal.Decimal)


def median(events):
    ordered = sorted(events, key=lambda e: (ns(e["dur"]), ns(e["ts"])))
    return ordered[(len(ordered) - 1) // 2]


def step_number(name):
    if not name.startswith("ProfilerStep#"):
        return None
    try:
        return int(name[len("ProfilerStep#"):])
    except ValueError:
        return None


def pick_unit(events, case):
    """Returns (unit label, [lo, hi] ns window or None for the whole trace)."""
    annotations = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"]
    steps = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("user_annotation", "cpu_op")
             and step_number(e.get("name", "")) is not None]
    if case.get("annotation"):
        hits = [e for e in annotations if case["annotation"] in e["name"]]
        a = median(hits)
        return "annotation " + a["name"], a
    if case.get("step"):
        hits = [e for e in steps if step_number(e["name"]) == case["step"]]
        hits.sort(key=lambda e: ns(e["ts"]))
        return hits[0]["name"], hits[0]
    if steps:
        s = median(steps)
        return s["name"], s
    return "whole trace", None


def union_length(intervals):
    total = 0
    cur_lo = cur_hi = None
    for lo, hi in sorted(intervals):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total


def expect(case):
    doc = load(os.path.join(HERE, case["trace"]))
    events = doc["traceEvents"]
    launches = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver"):
            c = (e.get("args") or {}).get("correlation")
            if c is not None:
                launches.setdefault(c, ns(e["ts"]))
    kernels = []
    for i, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            args = e.get("args") or {}
            start = ns(e["ts"])
            end = start + ns(e["dur"])
            launch = launches.get(args.get("correlation"), start)
            kernels.append({"start": start, "end": end, "dur": end - start, "launch": launch, "i": i,
                            "stream": args.get("stream", 0), "device": args.get("device", 0)})
    unit, ann = pick_unit(events, case)
    if ann is not None:
        lo = ns(ann["ts"])
        hi = lo + ns(ann["dur"])
        kernels = [k for k in kernels if lo <= k["launch"] <= hi]
    kernels.sort(key=lambda k: (k["start"], k["end"], k["i"]))
    if case.get("max_ops"):
        kernels = kernels[:case["max_ops"]]
    devices = sorted({k["device"] for k in kernels})
    assert len(devices) == 1, devices
    props = {p["id"]: p for p in doc.get("deviceProperties", [])}
    dev = props.get(devices[0], {})
    span = max(k["end"] for k in kernels) - kernels[0]["start"]
    busy = union_length([(k["start"], k["end"]) for k in kernels])
    overlapped = 0
    busy_end = None
    for k in kernels:
        if busy_end is not None and k["start"] < busy_end:
            overlapped += 1
        busy_end = k["end"] if busy_end is None else max(busy_end, k["end"])
    return {
        "name": case["name"],
        "trace": case["trace"],
        "step": case.get("step", 0),
        "annotation": case.get("annotation", ""),
        "max_ops": case.get("max_ops", 0),
        "unit": unit + (" (first %d kernels)" % case["max_ops"] if case.get("max_ops") else ""),
        "kind": "training" if any(step_number(e.get("name", "")) is not None and e.get("cat") in ("user_annotation", "cpu_op")
                                  for e in events if e.get("ph") == "X") else "inference",
        "kernels": len(kernels),
        "kernel_time_us": sum(k["dur"] for k in kernels) / 1000,
        "span_us": span / 1000,
        "busy_us": busy / 1000,
        "overlapped": overlapped,
        "streams": len({k["stream"] for k in kernels}),
        "device_name": dev.get("name", ""),
        "sms": dev.get("numSms", 0),
    }


def main():
    out = [expect(c) for c in CASES]
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    for r in out:
        print("%-36s %-32s kernels %5d  kernel %12.3f us  span %12.3f us  busy %12.3f us  streams %d  %s (%d SMs)"
              % (r["name"], r["unit"], r["kernels"], r["kernel_time_us"], r["span_us"], r["busy_us"],
                 r["streams"], r["device_name"] or "-", r["sms"]))


if __name__ == "__main__":
    main()
