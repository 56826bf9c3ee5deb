"""Security properties of the running agent.

- The bearer token (from remote_store.bearer_token_file, or env
  PUSHPROF_BEARER_TOKEN) never shows in argv, the log (debug level, also
  when the server rejects it, also with grpc's own tracing on: GRPC_TRACE
  prints call metadata, as text and hex) or /metrics, and the receiver sees it.
- Spool and local_store: directories 0700, files 0600, even under umask 000.
- The HTTP endpoint binds loopback when http_address is not set."""
import os
import socket
import stat

import pptest
import rellib as rl
from pptest import check, done, tmpdir

TOKEN = "tok-" + os.urandom(12).hex()
d = tmpdir("pushprof-rel-security-")
rcv = rl.Rcv(os.path.join(d, "rcv"), rl.free_port(), "--token", TOKEN)
agent = None


def secret_free(agent, what):
    with open(f"/proc/{agent.pid}/cmdline", "rb") as f:
        argv = f.read().decode(errors="replace")
    status, metrics = agent.get("/metrics")
    check(TOKEN not in argv, f"{what}: token not in argv")
    check(TOKEN not in metrics, f"{what}: token not in /metrics")
    return argv


try:
    # -- token from a file; spool and local store under umask 000 -----------
    tok = os.path.join(d, "token")
    with open(tok, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(tok, 0o600)
    spool, store = os.path.join(d, "spool"), os.path.join(d, "store")
    extra = (f"remote_store: {{address: \"127.0.0.1:{rcv.port}\", insecure: true, "
             f"bearer_token_file: {tok}, timeout: 2s}}\n")
    cfg = rl.write_config(os.path.join(d, "a.yaml"), spool=spool, store=store, level="debug",
                          extra=extra)
    old = os.umask(0)
    try:
        agent = pptest.Agent(cfg, os.path.join(d, "file.log"))
    finally:
        os.umask(old)
    rl.wait_for(lambda: len(rcv.calls()) >= 2, 15)
    secret_free(agent, "token file")
    calls = rcv.calls()
    check(calls and all(c["auth"] == "ok" for c in calls), "the receiver got the token",
          str([c["auth"] for c in calls][:3]))
    # the server goes away: undelivered profiles spool (created under umask 000)
    rcv.stop()
    rl.wait_for(lambda: rl.spool_files(spool), 15)
    files = rl.spool_files(spool) + rl.local_files(store)
    modes = {oct(stat.S_IMODE(os.stat(f).st_mode)) for f in files}
    check(rl.spool_files(spool) and modes == {"0o600"},
          "spool and local_store files are 0600 (umask 000)", str(modes))
    dmodes = [oct(stat.S_IMODE(os.stat(p).st_mode)) for p in (spool, store)]
    check(dmodes == ["0o700", "0o700"], "spool and local_store directories are 0700",
          str(dmodes))
    rc, _ = agent.stop()
    log = agent.log()
    check(rc == 0 and TOKEN not in log, "token file: not in the (debug) log")

    # -- token from the environment; a wrong one is rejected without echo -----
    rcv = rl.Rcv(os.path.join(d, "rcv2"), rcv.port, "--token", TOKEN)
    extra = (f"remote_store: {{address: \"127.0.0.1:{rcv.port}\", insecure: true, "
             f"timeout: 2s}}\n")
    cfg = rl.write_config(os.path.join(d, "b.yaml"), level="debug", extra=extra)
    for label, value in (("env", TOKEN), ("env, wrong token", TOKEN[::-1])):
        os.environ["PUSHPROF_BEARER_TOKEN"] = value
        try:
            agent = pptest.Agent(cfg, os.path.join(d, f"{label}.log"))
        finally:
            del os.environ["PUSHPROF_BEARER_TOKEN"]
        # until the receiver has judged a push from this agent (how soon
        # depends on the machine: the first window, then the push)
        want = "ok" if value == TOKEN else "wrong"
        seen = rl.wait_for(lambda: any(c["auth"] == want for c in rcv.calls()), 60, 0.2)
        check(seen, f"{label}: a push reached the receiver (auth {want})",
              str([c["auth"] for c in rcv.calls()]))
        if want == "wrong":  # the failure is logged with the next window
            agent.wait_log("UNAUTHENTICATED", 30)
        secret_free(agent, label)
        rc, _ = agent.stop()
        log = agent.log()
        check(rc == 0 and TOKEN not in log and TOKEN[::-1] not in log,
              f"{label}: token not in the (debug) log")
    auths = {c["auth"] for c in rcv.calls()}
    check(auths == {"ok", "wrong"}, "the receiver saw the right token, then the wrong one",
          str(auths))
    check("UNAUTHENTICATED" in log, "the wrong token is reported as UNAUTHENTICATED")

    # -- gRPC tracing on: credentials never reach the log -------------------------
    # GRPC_TRACE makes grpc print call metadata (as text and as a hex dump);
    # the agent forwards grpc's lines at debug level and must redact them
    rcv.stop()
    rcv = rl.Rcv(os.path.join(d, "rcv3"), rcv.port, "--token", TOKEN)
    extra = (f"remote_store: {{address: \"127.0.0.1:{rcv.port}\", insecure: true, "
             f"bearer_token_file: {tok}, headers: {{x-team: blue}}}}\n")
    cfg = rl.write_config(os.path.join(d, "t.yaml"), level="debug", extra=extra)
    os.environ.update(GRPC_TRACE="http,api", GRPC_VERBOSITY="debug")
    try:
        agent = pptest.Agent(cfg, os.path.join(d, "trace.log"))
    finally:
        del os.environ["GRPC_TRACE"], os.environ["GRPC_VERBOSITY"]
    check(rl.wait_for(lambda: any(c["auth"] == "ok" for c in rcv.calls()), 60),
          "tracing: the receiver got the token")
    secret_free(agent, "tracing")
    rc, _ = agent.stop()
    log = agent.log()
    meta = [l for l in log.splitlines() if 'msg=grpc' in l and "authorization" in l]
    print(f"tracing: {sum(1 for l in log.splitlines() if 'msg=grpc' in l)} grpc lines, "
          f"{len(meta)} naming the authorization header; e.g. {meta[:1]}")
    hexed = " ".join(f"{b:02x}" for b in TOKEN.encode())
    check(meta, "tracing: grpc's metadata lines reach the log (the test sees them)")
    check(rc == 0 and TOKEN not in log and hexed not in log.lower(),
          "tracing: the token is not in the log, as text or hex",
          f"{log.count(TOKEN)} + {log.lower().count(hexed)} occurrences")
    check("blue" in log, "tracing: other metadata is still logged (x-team: blue)")

    # -- existing spool / local_store directories: repaired or refused --------
    # a directory other users can write to is made 0700 (and logged); one
    # owned by another user, or a symlink, is refused with a clear error
    loose_spool, loose_store = os.path.join(d, "loose-spool"), os.path.join(d, "loose-store")
    os.makedirs(loose_spool)
    os.makedirs(loose_store)
    os.chmod(loose_spool, 0o777)
    os.chmod(loose_store, 0o755)
    cfg = rl.write_config(os.path.join(d, "dirs.yaml"), spool=loose_spool, store=loose_store,
                          remote=f"127.0.0.1:{rl.free_port()}")
    agent = pptest.Agent(cfg, os.path.join(d, "dirs.log"))
    modes = [oct(stat.S_IMODE(os.stat(p).st_mode)) for p in (loose_spool, loose_store)]
    rc, _ = agent.stop()
    log = agent.log()
    check(agent.started and modes == ["0o700", "0o700"],
          "world/group-accessible spool and local_store directories are repaired to 0700",
          str(modes))
    check("spool directory was accessible to other users" in log and
          "local_store directory was accessible to other users" in log and "mode_was=0777" in log,
          "each repair is logged with the old mode")
    nobody = os.path.join(d, "nobody-store")
    os.makedirs(nobody, mode=0o700)
    os.chown(nobody, 65534, 65534)
    link = os.path.join(d, "link-spool")
    os.symlink(loose_spool, link)
    for what, kw, needle in (("local_store owned by uid 65534", {"store": nobody},
                              "is owned by uid 65534, not by the agent"),
                             ("spool that is a symlink", {"spool": link},
                              "is a symbolic link; refusing")):
        cfg = rl.write_config(os.path.join(d, "bad-dir.yaml"),
                              remote=f"127.0.0.1:{rl.free_port()}", **kw)
        a = pptest.Agent(cfg, args=["--duration", "5s"])
        rc, _ = a.wait(60)
        check(rc != 0 and needle in a.log(), f"{what}: refused with a clear error",
              f"rc={rc} {a.log().strip()[-300:]}")

    # -- HTTP binds loopback by default ---------------------------------------
    cfg = os.path.join(d, "c.yaml")
    with open(cfg, "w") as f:
        f.write("node: sec\ncpu: {interval: 1s}\ngo_heap: {enabled: false}\n"
                f"local_store: {{directory: {d}/http-store}}\n")
    def port_free():
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", 7071)) != 0
    rl.wait_for(port_free, 30, 1)
    agent = pptest.Agent(cfg, os.path.join(d, "http.log"))
    inodes = set()
    for fd in os.listdir(f"/proc/{agent.pid}/fd"):
        try:
            link = os.readlink(f"/proc/{agent.pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                parts = line.split()
                if parts[3] == "0A" and parts[9] in inodes:
                    listening.append(parts[1])
    print(f"agent listens on {listening} (hex addr:port)")
    check(listening == ["0100007F:1B9F"], "default http_address: 127.0.0.1:7071 only",
          str(listening))
    check(agent.get("/healthz")[0] == 200, "/healthz answers on loopback")
    rc, _ = agent.stop()
    check(rc == 0, "agent exits 0")
finally:
    if agent and agent.p.poll() is None:
        agent.p.kill()
    rcv.stop()
done()
