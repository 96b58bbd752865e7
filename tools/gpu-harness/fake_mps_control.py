#!/usr/bin/env python3
"""A stand-in for nvidia-cuda-mps-control, for dry runs and tests (no GPU).

  fake_mps_control.py -d     start: write the pid file into
                             $CUDA_MPS_PIPE_DIRECTORY, log to
                             $CUDA_MPS_LOG_DIRECTORY/control.log, return
  fake_mps_control.py        one session: commands on stdin

Commands: get_server_list, get_client_list <pid>, ps, terminate_client,
quit. Clients are the PIDs fake workers append to <pipe>/fake-clients.
FAKE_MPS_FAIL=<message> makes -d fail with that message on stderr, as a
daemon that cannot start would.
"""

import os
import sys
import time

SERVER = 4242


def main(argv):
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    logd = os.environ.get("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps")
    pidf = os.path.join(pipe, "nvidia-cuda-mps-control.pid")

    def log(msg):
        with open(os.path.join(logd, "control.log"), "a") as f:
            f.write("[%s] %s\n" % (time.strftime("%Y-%m-%d %H:%M:%S"), msg))

    if argv[1:] == ["-d"]:
        fail = os.environ.get("FAKE_MPS_FAIL")
        if fail:
            sys.stderr.write(fail + "\n")
            return 1
        if os.path.exists(pidf):
            sys.stderr.write("An instance of this daemon is already running\n")
            return 1
        os.makedirs(pipe, exist_ok=True)
        with open(pidf, "w") as f:
            f.write("%d\n" % os.getpid())
        log("Startup")
        return 0
    if argv[1:]:
        sys.stderr.write("usage: fake_mps_control.py [-d]\n")
        return 2
    if not os.path.exists(pidf):
        sys.stderr.write("Cannot find MPS control daemon process\n")
        return 1
    clients = []
    cf = os.path.join(pipe, "fake-clients")
    if os.path.exists(cf):
        with open(cf) as f:
            clients = [int(l) for l in f.read().split()]
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        log("Accepting connection...\n" + "User did send " + line.strip())
        if f[0] == "get_server_list":
            if clients:
                print(SERVER)
        elif f[0] == "get_client_list":
            for c in clients:
                print(c)
        elif f[0] == "ps":
            print("PID ID SERVER DEVICE NAMESPACE COMMAND")
            for i, c in enumerate(clients):
                print("%d %d %d GPU-0a1b2c3d 4026531836 python3 worker.py" % (c, i + 1, SERVER))
        elif f[0] == "terminate_client":
            log("terminate_client %s" % " ".join(f[1:]))
        elif f[0] == "quit":
            os.unlink(pidf)
            if os.path.exists(cf):
                os.unlink(cf)
            log("Exit")
            return 0
        else:
            print("Unrecognized command: %s" % f[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
