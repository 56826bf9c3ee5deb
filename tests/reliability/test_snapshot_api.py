"""POST /api/v1/snapshot against the real agent and a real Go program:
who may ask for a heap profile, and how often.

- Off by default: 404 that says how to turn it on; /healthz and /metrics
  still answer.
- On, on a listener reachable from other hosts (0.0.0.0): check-config and
  `pushprof run` refuse a config without snapshot_api.bearer_token_file.
- With a token: no token, a wrong one, a prefix of the right one -> 401 (as
  uid nobody too); the right one -> 200 and a heap profile that
  `go tool pprof` reads, naming the workload's allocating function.
- It answers for what the config profiles only: a pid outside `targets` ->
  403 with the reason; go_heap.enabled: false -> 403 with the reason.
- Rate limits: the same pid again within per_pid_interval -> 429 with
  Retry-After; past per_client_per_minute -> 429."""
import os
import subprocess
import urllib.error
import urllib.request

import rellib as rl
import pptest
from pptest import check, done, tmpdir

d = tmpdir("pushprof-rel-snapapi-")
ready = os.path.join(d, "ready")
work = subprocess.Popen([rl.build_go("busyalloc", d), "0", ready])
rl.wait_for(lambda: os.path.exists(ready), 30)
TOKEN = "snap-" + os.urandom(12).hex()
tok = os.path.join(d, "token")
with open(tok, "w") as f:
    f.write(TOKEN + "\n")
os.chmod(tok, 0o600)
agent = None


def post(port, pid, token=None, host="127.0.0.1"):
    req = urllib.request.Request(f"http://{host}:{port}/api/v1/snapshot?pid={pid}",
                                 method="POST", data=b"")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def as_nobody(port, pid, token):
    """The same request from an unprivileged local user."""
    code = ("import sys, urllib.request, urllib.error\n"
            f"r = urllib.request.Request('http://127.0.0.1:{port}/api/v1/snapshot?pid={pid}',"
            " method='POST', data=b'')\n"
            f"r.add_header('Authorization', 'Bearer {token}')\n"
            "try:\n    print(urllib.request.urlopen(r, timeout=30).status)\n"
            "except urllib.error.HTTPError as e:\n    print(e.code)\n")
    out = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                          "/usr/bin/python3", "-c", code], capture_output=True, text=True,
                         timeout=60)
    return out.stdout.strip()


try:
    targets = f"targets:\n  - pids: [{work.pid}]\n"
    heap = "{enabled: true, interval: 0s}"
    store = os.path.join(d, "store")
    # -- off by default -------------------------------------------------------
    port = rl.free_port()
    cfg = rl.write_config(os.path.join(d, "off.yaml"), cpu=False, go_heap=heap, store=store,
                          targets=targets, http=f"127.0.0.1:{port}")
    agent = pptest.Agent(cfg, os.path.join(d, "off.log"))
    st, body, _ = post(agent.port, work.pid)
    check(st == 404 and b"snapshot_api.enabled" in body, "off by default: 404 with the reason",
          f"{st} {body[:120]!r}")
    check(agent.get("/healthz")[0] == 200 and agent.get("/metrics")[0] == 200,
          "health and metrics answer with the API off")
    agent.stop()

    # -- on, on every interface, without a token: refused at load -------------
    open_cfg = rl.write_config(os.path.join(d, "open.yaml"), cpu=False, go_heap=heap,
                               store=store, targets=targets, http=f"0.0.0.0:{rl.free_port()}",
                               extra="snapshot_api: {enabled: true}\n")
    r = pptest.run([rl.PUSHPROF, "check-config", open_cfg])
    check(r.returncode == 2 and "needs snapshot_api.bearer_token_file" in r.stderr,
          "check-config refuses the API on 0.0.0.0 without a token", r.stderr.strip())
    a = pptest.Agent(open_cfg)
    rc, _ = a.wait(30)
    check(rc == 2 and "needs snapshot_api.bearer_token_file" in a.log(),
          "pushprof run refuses it too (exit 2)", f"rc={rc} {a.log().strip()}")

    # -- on, on every interface, with a token ---------------------------------
    # a free port can be taken before the agent binds it (CI: "cannot
    # listen on 0.0.0.0:55373"): another port then
    for _ in range(5):
        port = rl.free_port()
        cfg = rl.write_config(
            os.path.join(d, "on.yaml"), cpu=False, go_heap=heap, targets=targets,
            store=store, http=f"0.0.0.0:{port}",
            extra=(f"snapshot_api: {{enabled: true, bearer_token_file: {tok}, "
                   f"per_pid_interval: 30s, per_client_per_minute: 4}}\n"))
        agent = pptest.Agent(cfg, os.path.join(d, "on.log"))
        if agent.port == port:
            break
        agent.stop()
    check(agent.started is not None and agent.port == port,
          "agent started with the API on 0.0.0.0", f"http_port={agent.port}")
    for label, t in (("no token", None), ("a wrong token", "nope"),
                     ("a prefix of the token", TOKEN[:-1])):
        st, body, hdr = post(port, work.pid, t)
        check(st == 401 and hdr.get("WWW-Authenticate") == "Bearer",
              f"{label}: 401 Bearer", f"{st} {body[:100]!r}")
    check(as_nobody(port, work.pid, "nope") == "401", "uid nobody with a wrong token: 401")
    st, body, _ = post(port, 1, TOKEN)
    check(st == 403 and b"not among this agent's targets" in body,
          "a pid outside targets: 403 with the reason", f"{st} {body[:120]!r}")
    st, body, _ = post(port, work.pid, TOKEN)
    check(st == 200 and body[:2] == b"\x1f\x8b", "the right token: 200, a gzip profile",
          f"{st} {body[:120]!r}")
    prof = os.path.join(d, "heap.pb.gz")
    with open(prof, "wb") as f:
        f.write(body)
    top = pptest.pprof("-top", "-sample_index=inuse_space", prof) if st == 200 else ""
    check("main.grow" in top, "go tool pprof reads it and names the allocating function",
          top[:400])
    st, body, hdr = post(port, work.pid, TOKEN)
    check(st == 429 and int(hdr.get("Retry-After", "0")) > 0 and
          b"per_pid_interval" in body, "the same pid again at once: 429 + Retry-After",
          f"{st} {body[:120]!r}")
    # the client has used 2 of its 4 a minute (pid 1 and the workload); two
    # more pids (kernel threads: 403, but asked), then the limit
    for pid in (2, 3):
        post(port, pid, TOKEN)
    st, body, _ = post(port, 4, TOKEN)
    check(st == 429 and b"per_client_per_minute" in body, "past per_client_per_minute: 429",
          f"{st} {body[:120]!r}")
    m = agent.metrics()
    check(m.get('pushprof_snapshot_api_refused_total{reason="unauthorized"}', 0) >= 3 and
          m.get('pushprof_snapshot_api_refused_total{reason="rate_limited"}', 0) >= 2,
          "/metrics counts the refusals", str({k: v for k, v in m.items() if "snapshot_api" in k}))
    log = agent.log()
    rc, _ = agent.stop()
    check(rc == 0 and TOKEN not in log, "exit 0; the token is not in the log")

    # -- go_heap disabled: 403, whatever the token ------------------------------
    port = rl.free_port()
    cfg = rl.write_config(os.path.join(d, "noheap.yaml"), cpu=True, targets=targets,
                          store=store, http=f"127.0.0.1:{port}",
                          extra="snapshot_api: {enabled: true}\n")
    agent = pptest.Agent(cfg, os.path.join(d, "noheap.log"))
    st, body, _ = post(port, work.pid)
    check(st == 403 and b"go_heap.enabled: false" in body,
          "go_heap.enabled false: 403 with the reason", f"{st} {body[:120]!r}")
    rc, _ = agent.stop()
    check(rc == 0, "agent exits 0")
finally:
    if agent and agent.p.poll() is None:
        agent.p.kill()
    work.kill()
done()
