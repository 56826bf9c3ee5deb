"""A process's threads as the scheduler counts them, for tests and bench/:
one reader of /proc/PID/task/TID/schedstat ("ns on CPU, ns waiting, times
run") and of a thread's voluntary context switches (its wake-ups). Nanoseconds, where /proc/PID/stat has 10 ms ticks (which matters for
runs of a few seconds); times run is how often a thread was put on a CPU:
its wake-ups, near enough."""
import os


def threads(pid):
    """{tid: (comm, ns on CPU, times run)} of pid's live threads; a thread
    that exits while it is read is left out. {} when pid is gone."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                v = f.read().split()
            out[int(tid)] = (comm, int(v[0]), int(v[2]))
        except (OSError, ValueError, IndexError):
            pass
    return out


def thread_runs(pid, name):
    """Times run of pid's thread called name (the first one, if several)."""
    for comm, _, runs in threads(pid).values():
        if comm == name:
            return runs
    raise RuntimeError(f"no thread {name} in {pid}")


def thread_wakeups(pid, name):
    """Voluntary context switches of pid's thread called name (the first
    one, if several): how often it went to sleep and so had to be woken.
    Unlike times run, a thread preempted on a busy host does not add to it."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != name:
                    continue
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
    raise RuntimeError(f"no thread {name} in {pid}")


def oncpu_s(pid):
    """Seconds on CPU of pid's live threads, None when pid is gone."""
    t = threads(pid)
    return sum(ns for _, ns, _ in t.values()) / 1e9 if t else None
