"""Debuginfo upload by the real agent against the test receiver's
DebuginfoService over real gRPC:
(1) a stripped -fno-omit-frame-pointer C binary whose frames cannot be named
    locally is uploaded exactly once (ShouldInitiateUpload once over several
    windows), the bytes received equal the file's, hash = its sha256;
(2) ShouldInitiateUpload answering false -> nothing uploaded;
(3) the debuginfo RPCs failing (UNAVAILABLE) or hanging do not hold back
    profile pushes nor the agent's exit;
(4) remote_store.debuginfo_upload: false -> no debuginfo RPC at all;
(5) a separate debug file of another build under the workload's build id
    is not sent (the workload's own bytes are);
(6) debuginfo_max_bytes_per_hour below the file's size: nothing uploaded;
(7) a store without the DebuginfoService (UNIMPLEMENTED, as a plain WriteRaw
    receiver answers): asked once, then uploads paused with one warning -
    no RPC for the other build ids (a second stripped binary among them).
"""
import hashlib
import os
import re
import shutil
import signal
import subprocess
import time

import cputest as ct
import pptest
from pptest import check, done, run, tmpdir
from receiver import Receiver

d = tmpdir()
binary = ct.build_c("chain", d)
run(["strip", binary], check_rc=0)
note = run(["readelf", "-n", binary], check_rc=0)
m = re.search(r"Build ID: ([0-9a-f]+)", note.stdout if hasattr(note, "stdout") else str(note))
check(m is not None, "the stripped workload has a GNU build id")
build_id = m.group(1) if m else "?"
data = open(binary, "rb").read()
sha = hashlib.sha256(data).hexdigest()
syms = run(["nm", binary])
check("no symbols" in (syms.stderr if hasattr(syms, "stderr") else str(syms)),
      "the workload really is stripped (no .symtab)")

work = subprocess.Popen([binary, "60"])


def agent_run(name, mode, duration="4s", extra="", pids=None, until=None):
    """An agent against a receiver whose DebuginfoService is in mode, for
    duration; with until (a predicate on the receiver), on past it until
    until holds (at most 60 s more): what a run must have done by its end
    takes longer on a loaded host (uploads to this Python receiver)."""
    out = os.path.join(d, name)
    os.makedirs(out, exist_ok=True)
    rcv = Receiver(os.path.join(out, "rcv"), debuginfo=mode).start()
    try:
        body = (f"remote_store: {{address: \"{rcv.address}\", insecure: true, timeout: 5s"
                f"{extra}}}\n"
                f"targets:\n  - pids: [{', '.join(str(p) for p in (pids or [work.pid]))}]\n")
        cfg, _ = ct.write_config(out, body, store=False, spool=os.path.join(out, "spool"))
        t0 = time.time()
        if until is None:
            agent = pptest.Agent(cfg, args=["--duration", duration])
            rc, _ = agent.wait(60)
        else:
            agent = pptest.Agent(cfg, args=["--duration", "120s"])
            secs = float(duration.rstrip("s"))
            while time.time() - t0 < secs + 60 and agent.p.poll() is None and \
                    (time.time() - t0 < secs or not until(rcv)):
                time.sleep(0.2)
            rc, _ = agent.stop(signal.SIGINT, 60)
        log = agent.log()
        took = time.time() - t0
        return rcv, rc, log, took
    finally:
        rcv.stop()


def all_pushed(rcv, log):
    """Every window's profiles arrived in accepted WriteRaw calls. A call may
    carry the window before it too when it outlasts a window (1 s here; an
    ASan build with both CPUs busy), as tests/cpu/test_cpu_push.py allows.
    The last window's push gets 2 s after the agent is told to stop
    (docs/operations.md); what a slow receiver (this Python one on a loaded
    host: 1-3 s a call) has not taken by then must be in the spool."""
    wins = ct.window_lines(log)
    built = sum(int(ct.logfields(w).get("processes", 0)) for w in wins)
    calls = rcv.calls()
    got = sum(c["series"] for c in calls)
    sp = pptest.spool_count(os.path.join(os.path.dirname(rcv.out), "spool"))
    ok = (1 <= len(calls) <= len(wins) and all(c["status"] == "OK" for c in calls) and
          pptest.delivered(got, sp, built))
    return ok, f"windows={len(wins)} profiles={built} spooled={sp} calls={calls}"


def rpcs(rcv, rpc, bid=None):
    return [c for c in rcv.debuginfo_calls()
            if c["rpc"] == rpc and (bid is None or c["build_id"] == bid)]



def uploaded(rcv):
    return rpcs(rcv, "MarkUploadFinished", build_id)


try:
    # (1) uploaded once, bytes equal
    rcv, rc, log, took = agent_run("yes", "yes", until=uploaded)
    nwin = len(ct.window_lines(log))
    check(rc == 0 and nwin >= 3, "agent ran >= 3 windows and exited 0", f"rc={rc} nwin={nwin}")
    for u in rpcs(rcv, "Upload"):
        print(f"uploaded build_id={u['build_id']} bytes={u['bytes']} chunks={u['chunks']}")
    # a library with a separate debug file on this host (libc6-dbg): that file is sent
    dbg_sent = 0
    for u in rpcs(rcv, "Upload"):
        f = f"/usr/lib/debug/.build-id/{u['build_id'][:2]}/{u['build_id'][2:]}.debug"
        if os.path.exists(f):
            dbg_sent += 1
            check(open(os.path.join(rcv.out, u["file"]), "rb").read() == open(f, "rb").read(),
                  f"separate debug file {f} sent instead of the mapped library")
    if not dbg_sent:
        print("note: no uploaded library had a separate debug file here; path not exercised")
    should = rpcs(rcv, "ShouldInitiateUpload", build_id)
    check(len(should) == 1, "ShouldInitiateUpload once for the build id over all windows",
          f"{should} {log[-2000:]}")
    check(should and should[0]["hash"] == sha and should[0]["type"] == 1 and
          should[0]["build_id_type"] == 1,
          "hash is the file's sha256, type EXECUTABLE, build id type GNU", f"{should}")
    init = rpcs(rcv, "InitiateUpload", build_id)
    check(len(init) == 1 and init[0]["size"] == len(data) and init[0]["hash"] == sha,
          "InitiateUpload once with the file's size and hash", f"{init}")
    ups = rpcs(rcv, "Upload", build_id)
    check(len(ups) == 1, "exactly one Upload of the build id", f"{ups}")
    got = open(os.path.join(rcv.out, ups[0]["file"]), "rb").read() if ups else b""
    check(got == data, "uploaded bytes equal the stripped file's bytes",
          f"{len(got)} vs {len(data)}")
    mark = rpcs(rcv, "MarkUploadFinished", build_id)
    check(len(mark) == 1 and ups and mark[0]["upload_id"] == ups[0]["upload_id"],
          "MarkUploadFinished once with the upload id", f"{mark}")
    ids = [c["build_id"] for c in rpcs(rcv, "ShouldInitiateUpload")]
    check(len(ids) == len(set(ids)), "no build id asked twice (libraries included)", f"{ids}")
    ok, why = all_pushed(rcv, log)
    check(ok, "every window's profile in an accepted WriteRaw alongside", why)
    check("debuginfo" in log and "result=uploaded" in log, "the upload is logged",
          log[-1500:])

    # (2) the server says no
    rcv, rc, log, took = agent_run("no", "no", duration="3s",
                                   until=lambda r: rpcs(r, "ShouldInitiateUpload", build_id))
    check(rc == 0, "agent exits 0 (server says no)", f"rc={rc}")
    check(len(rpcs(rcv, "ShouldInitiateUpload", build_id)) == 1,
          "asked once when the server says no", f"{rcv.debuginfo_calls()}")
    check(not rpcs(rcv, "InitiateUpload") and not rpcs(rcv, "Upload") and
          not [f for f in os.listdir(rcv.out) if f.startswith("dbg-")],
          "nothing uploaded when ShouldInitiateUpload answers false",
          f"{rcv.debuginfo_calls()}")

    # (3) debuginfo down / hanging: profile pushes unaffected, exit prompt
    for mode in ("down", "hang"):
        rcv, rc, log, took = agent_run(mode, mode, duration="4s")
        nwin = len(ct.window_lines(log))
        check(rc == 0 and nwin >= 3, f"agent runs and exits 0 with debuginfo {mode}",
              f"rc={rc} nwin={nwin}")
        check(len(rpcs(rcv, "ShouldInitiateUpload")) >= 1,
              f"debuginfo was attempted ({mode})", f"{rcv.debuginfo_calls()}")
        ok, why = all_pushed(rcv, log)
        check(ok, f"every window pushed with debuginfo {mode}", why)
        check(not rpcs(rcv, "Upload"), f"nothing uploaded ({mode})")
        check(took < 4 + 6, f"exit not held by debuginfo {mode} ({took:.1f}s for a 4s run)",
              log[-1500:])

    # (5) a separate debug file under the workload's build id that is not
    # of that build (another ELF): ignored, the workload itself is sent
    planted = f"/usr/lib/debug/.build-id/{build_id[:2]}/{build_id[2:]}.debug"
    check(not os.path.exists(planted), "no debug file for the test's build id yet", planted)
    made_dir = not os.path.isdir(os.path.dirname(planted))
    os.makedirs(os.path.dirname(planted), exist_ok=True)
    shutil.copy("/bin/true", planted)
    try:
        rcv, rc, log, took = agent_run("planted", "yes", until=uploaded)
        ups = rpcs(rcv, "Upload", build_id)
        got = open(os.path.join(rcv.out, ups[0]["file"]), "rb").read() if ups else b""
        check(rc == 0 and len(ups) == 1 and got == data,
              "a debug file of another build is not sent; the workload's own bytes are",
              f"{len(ups)} uploads, {len(got)} bytes vs {len(data)}")
        check("ignoring a separate debug file" in log and "not " + build_id in log,
              "the mismatch is logged", log[-1200:])
    finally:
        os.unlink(planted)
        if made_dir:
            os.rmdir(os.path.dirname(planted))

    # (6) remote_store.debuginfo_max_bytes_per_hour below the file's size: not
    # sent, the reason logged
    rcv, rc, log, took = agent_run("budget", "yes", duration="3s",
                                   extra=", debuginfo_max_bytes_per_hour: 4KiB")
    check(rc == 0 and not rpcs(rcv, "Upload") and len(rcv.calls()) >= 1,
          "over the hourly debuginfo budget: nothing uploaded, profiles still pushed",
          f"{rpcs(rcv, 'Upload')}")
    check("debuginfo_max_bytes_per_hour" in log, "the budget is named in the log",
          log[-1200:])

    # (7) no DebuginfoService at all: one question, then a pause. A second
    # stripped binary (its own build id) makes sure there is more to ask.
    os.makedirs(os.path.join(d, "second"), exist_ok=True)
    binary2 = ct.build_c("chain", os.path.join(d, "second"),
                         flags=("-Wl,--build-id=0x" + "5e" * 20,))
    run(["strip", binary2], check_rc=0)
    work2 = subprocess.Popen([binary2, "60"])
    try:
        time.sleep(0.3)
        rcv, rc, log, took = agent_run("absent", "absent", duration="4s",
                                       pids=[work.pid, work2.pid])
    finally:
        work2.kill()
        work2.wait()
    nwin = len(ct.window_lines(log))
    asked = rcv.debuginfo_calls()
    ok, why = all_pushed(rcv, log)
    check(rc == 0 and nwin >= 3 and ok, "no DebuginfoService: every window pushed",
          f"rc={rc} {why}\n{log[-3000:]}")
    check(len(asked) == 1 and asked[0]["status"] == "UNIMPLEMENTED",
          "asked once (UNIMPLEMENTED), then no debuginfo RPC for the other build ids",
          f"{asked}")
    check(log.count("debuginfo uploads paused") == 1 and
          "debuginfo upload failed" not in log,
          "one warning that uploads are paused, no per-build-id failures", log[-1500:])

    # (4) off
    rcv, rc, log, took = agent_run("off", "yes", duration="2s",
                                   extra=", debuginfo_upload: false")
    check(rc == 0 and not rcv.debuginfo_calls() and len(rcv.calls()) >= 1,
          "debuginfo_upload: false -> profiles pushed, no debuginfo RPC",
          f"{rcv.debuginfo_calls()}")
finally:
    work.kill()
    work.wait()
    shutil.rmtree(d, ignore_errors=True)
done()
