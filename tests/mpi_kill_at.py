#!/usr/bin/env python3
"""Stops a distributed run (mpirun -n RANKS deepgrid run ...) at a chosen round and kills it.

Used by tests/mpi_cli_test.sh's kill test, so that where a kill lands does not depend on how fast
the machine is: it watches the traces file, where rank 0 writes each round's receivers' values,
and stops the run (SIGSTOP) once it holds the chosen step. With several ranks one of them is
stopped at every moment until then, so the run cannot go more than a round past what was seen
(each round ends with a collective); one rank alone runs in slices of half a millisecond.
Then SIGKILL goes to one rank, or SIGINT to mpirun.
"""
import ast, os, random, signal, struct, sys, time

# mpi_kill_at.py PID TRACES STEP STEPS RANKS SIGNAL: PID is timeout's, whose child is mpirun.
pid, traces = sys.argv[1], sys.argv[2]
at, steps, ranks = map(int, sys.argv[3:6])
sig = sys.argv[6]

def children(parent):
    found = []
    for p in os.listdir("/proc"):
        try:
            with open(f"/proc/{p}/status") as f:
                if any(l.split() == ["PPid:", str(parent)] for l in f):
                    found.append(int(p))
        except (OSError, ValueError):
            pass
    return found

def done():  # the steps whose receivers' values the traces file holds (rows without NaN)
    try:
        data = open(traces, "rb").read()
        size = struct.unpack_from("<H" if data[6] == 1 else "<I", data, 8)[0]
        start = (10 if data[6] == 1 else 12) + size
        header = ast.literal_eval(data[start - size:start].decode())
        if header["shape"] != (steps, (len(data) - start) // 8 // steps):
            return 0
    except (OSError, IndexError, SyntaxError, ValueError, UnicodeDecodeError, struct.error):
        return 0
    values = struct.unpack_from(f"<{(len(data) - start) // 8}d", data, start)
    per_step = len(values) // steps
    n = 0
    while n < steps and all(v == v for v in values[n * per_step:(n + 1) * per_step]):
        n += 1
    return n

def stop(p):  # stops p and waits until it is stopped (or gone)
    try:
        os.kill(p, signal.SIGSTOP)
        while open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] not in "TtZX":
            time.sleep(0.0001)
    except (OSError, IndexError):
        pass

def go_on(p):
    try:
        os.kill(p, signal.SIGCONT)
    except OSError:
        pass

deadline = time.monotonic() + 100
def alive(p):
    return os.path.exists(f"/proc/{p}") and time.monotonic() < deadline

launcher = None
while alive(pid) and not launcher:
    launcher = next(iter(children(pid)), None)
    time.sleep(0.001)
rank_pids = []
while launcher and alive(launcher) and len(rank_pids) < ranks:
    rank_pids = children(launcher)
    time.sleep(0.001)
if len(rank_pids) != ranks:
    sys.exit(f"mpi_kill_at.py: found {len(rank_pids)} of mpirun's {ranks} ranks")
turn = 0
while alive(launcher):
    stop(rank_pids[turn % ranks])
    if ranks > 1:
        go_on(rank_pids[(turn - 1) % ranks])
    seen = done()
    if seen >= at:
        break
    if ranks == 1:
        go_on(rank_pids[0])
    time.sleep(0.0005 if ranks == 1 else 0.002)
    turn += 1
for p in rank_pids:
    stop(p)
seen = done()
print(f"mpi_kill_at.py: the run stopped at step {seen} of {steps} (aimed at {at}), then SIG{sig}")
if sig == "INT":
    # mpirun lets its ranks go on (SIGCONT) and sends them SIGTERM a second later: they are
    # held stopped until it is theirs, then stop at the end of their round.
    os.kill(launcher, signal.SIGINT)
    def told(p):  # whether p has SIGTERM or SIGINT pending, or has ended
        try:
            status = [l.split() for l in open(f"/proc/{p}/status")]
        except OSError:
            return True
        s = {l[0]: l[1] for l in status if len(l) > 1}
        pending = int(s.get("SigPnd:", "0"), 16) | int(s.get("ShdPnd:", "0"), 16)
        signals = 1 << signal.SIGTERM - 1 | 1 << signal.SIGINT - 1
        return pending & signals != 0 or s.get("State:", "X") in "ZX"
    until = time.monotonic() + 10
    while not all(told(p) for p in rank_pids) and time.monotonic() < until:
        for p in rank_pids:
            if not told(p):
                stop(p)
        time.sleep(0.0002)
else:
    os.kill(random.choice(rank_pids), signal.SIGKILL)
for p in rank_pids:
    go_on(p)
