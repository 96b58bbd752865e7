"""Shared helpers of the harness tests (stdlib only)."""

import os
import shutil
import subprocess
import sys
import tempfile

TESTS = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.dirname(TESTS)
REPO = os.path.dirname(os.path.dirname(HARNESS))
sys.path.insert(0, HARNESS)

_COLOCD = {}


def colocd_binary():
    """The colocd binary: $COLOCD_BIN if set, else built once per test run
    with `go build -o <tmp>/colocd ./cmd/colocd` (read-only use of the repo).
    None when neither is possible (the caller skips)."""
    if "path" in _COLOCD:
        return _COLOCD["path"]
    path = os.environ.get("COLOCD_BIN")
    if path:
        _COLOCD["path"] = path if os.access(path, os.X_OK) else None
        return _COLOCD["path"]
    go = shutil.which("go")
    if not go or not os.path.exists(os.path.join(REPO, "cmd", "colocd")):
        _COLOCD["path"] = None
        return None
    d = tempfile.mkdtemp(prefix="colocd-harness-test-")
    out = os.path.join(d, "colocd")
    p = subprocess.run([go, "build", "-o", out, "./cmd/colocd"], cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("go build ./cmd/colocd failed:\n" + p.stderr)
    _COLOCD["path"] = out
    return out


def run_py(script, *args, **kw):
    """Run one of the harness's scripts with this interpreter."""
    env = dict(os.environ)
    env.update(kw.pop("env", {}))
    return subprocess.run([sys.executable, os.path.join(HARNESS, script)] + list(args), capture_output=True,
                          text=True, env=env, **kw)


FAKE_RUN_ARGS = ["--backend", "fake", "--budget-s", "60", "--inference", "resnet50-infer,gpt-decode",
                 "--training", "bert-train,gpt2-train", "--timeslice-loads", "0.3", "--mps-pcts", "100,50",
                 "--min-requests", "20", "--max-requests", "30", "--solo-requests", "20",
                 "--solo-backtoback", "10", "--solo-train-iters", "4"]
