"""The harness's own MPS control daemon: start, query, quit.

The daemon runs with its own pipe and log directories (never the system
defaults), so it cannot touch another daemon, and every command is one run of
the control binary with the same environment and a timeout. Nothing here
changes a GPU setting. Tested with fake_mps_control.py (tests/test_mps.py).
"""

import os
import subprocess

import core


class Daemon(object):
    def __init__(self, control, pipe_dir, log_dir, base_env=None, visible=None, timeout_s=10.0):
        self.control = control
        self.pipe_dir = os.path.abspath(pipe_dir)
        self.log_dir = os.path.abspath(log_dir)
        self.env = core.mps_env(os.environ if base_env is None else base_env, self.pipe_dir, self.log_dir,
                                visible=visible)
        self.timeout_s = timeout_s
        self.started = False

    def client_env(self, pct):
        return core.mps_env(self.env, self.pipe_dir, self.log_dir, pct=pct)

    def _run(self, argv, stdin_text=None):
        try:
            p = subprocess.run(argv, input=stdin_text, env=self.env, capture_output=True, text=True,
                               timeout=self.timeout_s)
            return {"argv": argv, "stdin": stdin_text, "rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
        except subprocess.TimeoutExpired as e:
            return {"argv": argv, "stdin": stdin_text, "rc": None, "timeout_s": self.timeout_s,
                    "stdout": _text(e.stdout), "stderr": _text(e.stderr)}
        except OSError as e:
            return {"argv": argv, "stdin": stdin_text, "rc": None, "stdout": "", "stderr": "%s: %s" % (type(e).__name__, e)}

    def start(self):
        """Start the daemon (-d). ok is True when it returned 0 and wrote its
        pid file; otherwise the result carries everything it said."""
        os.makedirs(self.pipe_dir, exist_ok=True)
        os.makedirs(self.log_dir, exist_ok=True)
        if os.path.exists(self.pid_file()):
            return {"ok": False, "reason": "a daemon already uses pipe directory %s" % self.pipe_dir}
        r = self._run(core.daemon_start_argv(self.control))
        r["env"] = {k: v for k, v in self.env.items() if k.startswith("CUDA_")}
        import time
        for _ in range(50 if r["rc"] == 0 else 0):
            if os.path.exists(self.pid_file()):
                break
            time.sleep(0.1)
        r["pid_file"] = os.path.exists(self.pid_file())
        r["ok"] = r["rc"] == 0 and r["pid_file"]
        if not r["ok"]:
            r["control_log"] = self.log_tail()
        self.started = r["rc"] == 0 or r["pid_file"]
        return r

    def pid_file(self):
        return os.path.join(self.pipe_dir, core.MPS_PID_FILE)

    def command(self, verb, *args):
        return self._run(core.control_argv(self.control), core.control_input(verb, *args))

    def parsed(self, parse, verb, *args):
        """The command's answer and what parse reads from its stdout: []
        when the command failed or its output does not parse."""
        r = self.command(verb, *args)
        try:
            return r, parse(r["stdout"]) if r["rc"] == 0 else []
        except ValueError:
            return r, []

    def log_tail(self, name="control.log", n=4000):
        p = os.path.join(self.log_dir, name)
        try:
            with open(p, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def attachment(self, pids):
        """Whether the worker PIDs are clients of this daemon, with the raw
        answers: get_server_list, ps, get_client_list, control.log."""
        out = {}
        out["get_server_list"], servers = self.parsed(core.parse_pid_lines, "get_server_list")
        out["ps"], rows = self.parsed(core.parse_ps, "ps")
        lists = {}
        for s in servers:
            out["get_client_list %d" % s], lists[s] = self.parsed(core.parse_pid_lines, "get_client_list", s)
        ok, ev = core.mps_attachment(pids, servers, rows, lists, self.log_tail(n=200000))
        ev["raw"] = out
        return ok, ev, rows

    def terminate_client(self, client_pid):
        """terminate_client <server> <client> for each server that has the
        client (the documented way to end an MPS client before a signal)."""
        res = []
        _, servers = self.parsed(core.parse_pid_lines, "get_server_list")
        for s in servers:
            res.append(self.command("terminate_client", s, client_pid))
        return res

    def quit(self):
        """echo quit | control, with the same environment."""
        r = self.command("quit")
        import time
        for _ in range(50):
            if not os.path.exists(self.pid_file()):
                break
            time.sleep(0.1)
        r["pid_file_left"] = os.path.exists(self.pid_file())
        r["ok"] = r["rc"] == 0
        self.started = False
        return r


def _text(b):
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else b
