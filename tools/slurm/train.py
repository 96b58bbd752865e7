#!/usr/bin/env python3
"""A stand-in trainer for the Slurm recipe's `python train.py --resume-from ckpt/`.

It counts TRAIN_STEPS steps of TRAIN_STEP_SECONDS each, resumes from the count
in <resume-from>/step, and on SIGTERM writes the count there (taking
TRAIN_CHECKPOINT_SECONDS to, as a large model would) and exits 143.
Each start, stop and end is one `train:` line with the lease's environment.
"""
import argparse
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--resume-from", required=True)
args = parser.parse_args()

os.makedirs(args.resume_from, exist_ok=True)
ckpt = os.path.join(args.resume_from, "step")
steps = int(os.environ.get("TRAIN_STEPS", "20"))
interval = float(os.environ.get("TRAIN_STEP_SECONDS", "0.25"))
ckpt_seconds = float(os.environ.get("TRAIN_CHECKPOINT_SECONDS", "0"))
step = int(open(ckpt).read()) if os.path.exists(ckpt) else 0


def say(what):
    env = os.environ.get
    print(f"train: {what} step={step} t={time.time():.1f} restart_count={env('SLURM_RESTART_COUNT', '0')} "
          f"lease={env('COLOCD_LEASE_ID', '')} pct={env('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE', '')} "
          f"pipe={env('CUDA_MPS_PIPE_DIRECTORY', '')}", flush=True)


def save():
    time.sleep(ckpt_seconds if stop else 0)
    with open(ckpt + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(ckpt + ".tmp", ckpt)


stop = False


def on_term(signum, frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
say("start")
while step < steps and not stop:
    time.sleep(interval)
    step += 1
save()
if stop:
    say("sigterm checkpoint")
    sys.exit(143)
say("done")
