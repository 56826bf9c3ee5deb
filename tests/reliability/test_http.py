"""The HTTP endpoint under slow clients: probes keep answering.

500 connections trickle a request line one byte every 2 s (a slowloris: each
keeps its connection busy but never finishes a request), spread over 20
loopback source addresses (127.0.0.10-29, 25 each), while another address
opens 100 at once. Meanwhile /healthz and /metrics from 127.0.0.1 must
answer within 1 s, every time; the greedy address gets at most 32 held
connections; after the clients go away the agent is still fine and its
fd count is back to where it was.
Before the fix (one select() thread, 64 connections, no per-address limit)
0 of 20 probes answered with 64 trickling connections."""
import os
import socket
import time

import pptest
import rellib as rl
from pptest import check, done, tmpdir

d = tmpdir("pushprof-rel-http-")
cfg = rl.write_config(os.path.join(d, "a.yaml"), cpu=True, store=os.path.join(d, "store"),
                      targets="targets:\n  - pids: [1]\n")
agent = pptest.Agent(cfg, os.path.join(d, "agent.log"))
slow, greedy = [], []


def connect(src):
    s = socket.socket()
    s.setblocking(True)
    s.settimeout(2)
    s.bind((src, 0))
    s.connect(("127.0.0.1", agent.port))
    return s


def fds():
    return len(os.listdir(f"/proc/{agent.pid}/fd"))


def probe(path):
    t = time.time()
    code, _ = agent.get(path, timeout=5)
    return code, time.time() - t


def held(socks):
    """How many of socks the server still holds open (not closed or reset)."""
    n = 0
    for s in socks:
        try:
            s.setblocking(False)
            if s.recv(1, socket.MSG_PEEK) != b"":
                n += 1
        except BlockingIOError:
            n += 1  # open, nothing to read
        except OSError:
            pass
    return n


try:
    check(agent.started is not None and agent.port, "agent started")
    fds0 = fds()
    for i in range(500):
        try:
            slow.append(connect(f"127.0.0.{10 + i % 20}"))
        except OSError as e:
            print(f"slow client {i}: {e}")
    for i in range(100):
        try:
            greedy.append(connect("127.0.0.250"))
        except OSError:
            pass
    print(f"{len(slow)} slow clients connected, {len(greedy)} greedy connects")
    time.sleep(0.5)
    alive = held(greedy)  # beyond its limit, an address's connections are closed at once
    print(f"greedy address: {alive} of {len(greedy)} connections held")
    check(0 < alive <= 32, "one address holds at most 32 connections", f"{alive}")
    req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    answered, worst = 0, 0.0
    for rnd in range(10):  # 10 rounds, ~2 s apart: 20 probes over ~20 s
        for s in slow:
            try:
                s.send(req[rnd % len(req):rnd % len(req) + 1])  # one byte: still no request
            except OSError:
                pass
        for path in ("/healthz", "/metrics"):
            code, took = probe(path)
            worst = max(worst, took)
            answered += code == 200 and took < 1.0
        time.sleep(2)
    still = held(slow)
    print(f"probes answered within 1 s: {answered} of 20; slowest {worst:.2f}s; "
          f"slow clients still connected: {still}")
    check(still >= 450, "the slow clients were held open all along", f"{still} of {len(slow)}")
    check(len(slow) == 500, "500 slow clients connected", str(len(slow)))
    check(answered == 20, "/healthz and /metrics answer within 1 s with 500 slow clients",
          f"{answered} of 20, slowest {worst:.2f}s")
    for s in slow + greedy:
        s.close()
    slow, greedy = [], []
    check(rl.wait_for(lambda: fds() <= fds0 + 2, 20, 0.5),
          "connections released when the clients go", f"fds {fds0} -> {fds()}")
    check(probe("/healthz")[0] == 200, "/healthz after the flood")
    rc, _ = agent.stop()
    check(rc == 0, "agent exits 0")
finally:
    for s in slow + greedy:
        s.close()
    if agent.p.poll() is None:
        agent.p.kill()
done()
