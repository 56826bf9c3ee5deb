"""The agent's path for an OOM profile: oom_watch_deliver() hands it to the
outbox, which writes it to the local store and the spool before any network
call - here the remote store is down (nothing listens) when the kill
happens, the profile is on disk anyway, readable by `go tool pprof`, and it
reaches the (real gRPC) receiver once that comes up."""
import glob
import os
import socket
import time

from pptest import check, tmpdir
import oomlib
from receiver import Receiver


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    oomlib.cleanup_stale()
    d = tmpdir()
    port = closed_port()
    leak, _, _ = oomlib.build_workloads(d)
    local, spool = os.path.join(d, "local"), os.path.join(d, "spool")
    cfg = os.path.join(d, "pushprof.yaml")
    with open(cfg, "w") as f:
        f.write(f"""node: oomtest
remote_store:
  address: 127.0.0.1:{port}
  insecure: true
  timeout: 1s
local_store:
  directory: {local}
spool:
  directory: {spool}
external_labels:
  cluster: c1
go_heap:
  max_buckets: 50000
  max_stack_depth: 64
""")
    w = oomlib.Watcher(d, "--config", cfg)
    try:
        with oomlib.Cgroup("outbox", 100) as cg:
            v = oomlib.Victim(cg, [leak])
            check(v.ready(), "victim started")
            check(w.tracked(v.pid), "victim tracked")
            v.go()
            check(v.wait() == -9, "victim SIGKILLed")
            line = w.err.wait(lambda x: "OOM profile captured" in x, 20)
            check(line is not None and f"pid={v.pid}" in line, "log line for the profile",
                  str(line))
            files = glob.glob(os.path.join(local, "*.pb.gz"))
            check(len(files) == 1, "one profile in the local store", str(files))
            if files:
                check("oom" in os.path.basename(files[0]), "file name says oom", files[0])
                check(oomlib.top_inuse(files[0]) == "main.leakyAllocator",
                      "local store profile: top inuse_space is the leak")
            spooled = [p for p in glob.glob(os.path.join(spool, "**"), recursive=True)
                       if os.path.isfile(p)]
            check(len(spooled) >= 1, "spooled for delivery while the store is down",
                  str(spooled))
        check(w.alive(), "watcher alive with the remote store down")

        # the store comes back: the spooled OOM profile is delivered
        rcv = Receiver(os.path.join(d, "rcv"), port=port).start()
        try:
            got = None
            for _ in range(300):
                got = [s for s in rcv.series() if s["labels"].get("trigger") == "oom"]
                if got:
                    break
                time.sleep(0.1)
            if check(got, "OOM profile delivered once the store is back"):
                lab = got[0]["labels"]
                check(lab.get("__name__") == "memory" and lab.get("pid") == str(v.pid) and
                      lab.get("oom_complete") == "true" and lab.get("cluster") == "c1" and
                      lab.get("node") == "oomtest", "delivered labels", str(lab))
                f = os.path.join(rcv.out, got[0]["files"][0])
                check(oomlib.top_inuse(f) == "main.leakyAllocator",
                      "delivered profile: top inuse_space is the leak")
        finally:
            rcv.stop()
    finally:
        st = w.stop()
    check(st and st["delivered"] == 1 and st["deliver_failed"] == 0,
          "one result handed to the outbox", str(st))
    oomlib.finish(d)


if __name__ == "__main__":
    main()
