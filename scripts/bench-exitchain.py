#!/usr/bin/env python3
# bench-exitchain.py - how long a container engine takes from a program's last line to the
# answer of its wait (POST /containers/{id}/wait?condition=next-exit): the part of a warm
# spare's call (docs/design/lifecycle.md, "Container spares") that is the engine's, not ours.
# Each round: a container like a spare (python3 reading its program from a FIFO in a bind-
# mounted folder) is created and started, the wait is armed, the program is handed over; the
# program prints CLOCK_MONOTONIC (host-wide: no time namespace) as its last line.
# Usage (root): scripts/bench-exitchain.py SOCKET CLI [ROUNDS] [IMAGE]
#   scripts/bench-exitchain.py /var/run/docker.sock docker 10
#   scripts/bench-exitchain.py /run/podman/podman.sock "podman --cgroup-manager=cgroupfs
#       --events-backend=file --runtime runc" 10
# Needs curl. Containers carry the label vestibule-exitchain=1 and are removed each round.
import os, shlex, statistics, subprocess, sys, tempfile, time

sock, cli = sys.argv[1], shlex.split(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
image = sys.argv[4] if len(sys.argv) > 4 else "vestibule/python:bookworm"
CODE = b"import sys, time\nprint(1)\nsys.stdout.flush()\nsys.stderr.write(repr(time.clock_gettime(time.CLOCK_MONOTONIC)))\n"
res = []
for _ in range(rounds):
    d = tempfile.mkdtemp(dir="/tmp")
    os.chmod(d, 0o755)
    fifo = d + "/main.py"
    os.mkfifo(fifo)
    os.chmod(fifo, 0o666)
    cid = None
    try:
        cid = subprocess.check_output(cli + ["create", "--network", "none", "--init", "--ulimit", "nofile=1024:1024",
                                             "--ulimit", "nproc=4096:4096", "--label", "vestibule-exitchain=1",
                                             "-v", d + ":/sandbox:ro", image, "python3", "/sandbox/main.py"], text=True).strip()
        subprocess.check_call(cli + ["start", cid], stdout=subprocess.DEVNULL)
        w = subprocess.Popen(["curl", "-s", "--unix-socket", sock, "-X", "POST",
                              f"http://x/containers/{cid}/wait?condition=next-exit"], stdout=subprocess.PIPE)
        time.sleep(0.5)  # the wait is armed; the interpreter waits in open()
        fd = os.open(fifo, os.O_WRONLY)
        t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
        os.write(fd, CODE)
        os.close(fd)
        w.wait()
        t2 = time.clock_gettime(time.CLOCK_MONOTONIC)
        t1 = float(subprocess.run(cli + ["logs", cid], capture_output=True, text=True).stderr.strip().splitlines()[-1])
        res.append(((t1 - t0) * 1000, (t2 - t1) * 1000))
    finally:
        if cid:
            subprocess.run(cli + ["rm", "-f", cid], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.unlink(fifo)
        os.rmdir(d)
print(f"{sys.argv[2].split()[0]}: hand-over to the program's last line p50 "
      f"{statistics.median(r[0] for r in res):.1f} ms; its last line to the wait's answer p50 "
      f"{statistics.median(r[1] for r in res):.1f} ms (min {min(r[1] for r in res):.1f}); {len(res)} rounds")
