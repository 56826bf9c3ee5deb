"""The commands the docs show are the commands the binary has.

Every shell command in README.md's "Using it" block and in docs/running.md's
code blocks is run, sandboxed: temp directories for the local store and the
spool (never /var/lib/pushprof), the real test receiver on loopback in place
of the Parca server, a real Go program (tests/reliability/busyalloc.go) in
place of PID 1234, agent runs bounded with --duration. A command fails the
test when it no longer exists, a flag is unknown, or it exits non-zero; a file
pattern the docs give for local profiles fails it when it matches no file the
agent wrote. A command is either run or listed in SKIP below with the reason,
so a command added to those docs is run by default.

Also, over README.md and docs/*.md: every `pushprof CMD` shown in code has
`pushprof help CMD`, every --flag shown with it is in that help, and every
YAML block is accepted by `pushprof check-config --no-file-checks`; every
config key the binary knows is in docs/configuration.md."""
import glob
import gzip
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pptest
import rellib as rl
from pptest import PUSHPROF, SOURCE_DIR, check, done, go_env, tmpdir

# Commands shown in the docs that are not run here: exact command (comments
# stripped, tokens joined by one space) -> why.
SKIP = {
    # The demo installs Debian packages and builds the tree in place; its own
    # test runs it (tests/cli/test_demo.py).
    "./scripts/demo.sh": "tested by tests/cli/test_demo.py (it installs packages and builds)",
    # Builds the tree in place; this test runs from that very build.
    "meson setup build && ninja -C build": "builds the tree this test runs from",
}

# Placeholders and example values in the docs -> what the sandbox puts there.
SERVER_NAMES = {"parca:7070", "localhost:7070", "127.0.0.1:7070", "parca.example.com:443"}
DEMO_DIR = "/tmp/pushprof-demo/profiles"     # where ./scripts/demo.sh leaves profiles
RUN_MAX_S = 4                                # `run --duration` longer than this is cut to it

d = tmpdir("pushprof-docs-")
procs = []


def fenced(text):
    """[(lang, body, first line number)] of the ``` blocks at line start."""
    return [(m.group(1), m.group(2), text[:m.start()].count("\n") + 1)
            for m in re.finditer(r"^```(\w*)[^\n]*\n(.*?)^```", text, re.M | re.S)]


def shell_commands(body):
    """Commands of a sh block: continuation lines joined, comments dropped."""
    out, cur = [], ""
    for ln in body.splitlines():
        if ln.rstrip().endswith("\\"):
            cur += ln.rstrip()[:-1] + " "
            continue
        cur += ln
        toks = shlex.split(cur, comments=True)
        if toks:
            out.append(toks)
        cur = ""
    return out


def section(text, heading):
    """(the section under heading, its first line's number - 1)"""
    start = text.index(heading)
    nxt = text.find("\n## ", start + len(heading))
    return text[start:nxt if nxt >= 0 else len(text)], text[:start].count("\n")


def sandbox_config(path, remote=None, snapshot_api=False):
    """config/pushprof.yaml as shipped, with its directories and HTTP port
    moved into the sandbox (remote_store and snapshot_api set when asked)."""
    lines, sec = [], None
    for ln in open(os.path.join(SOURCE_DIR, "config", "pushprof.yaml")).read().splitlines():
        m = re.match(r"^([a-z_]+):", ln)
        if m:
            sec = m.group(1)
        if sec in ("local_store", "spool") and re.match(r"^\s+directory:", ln):
            ln = f"  directory: {d}/{os.path.basename(path)}-{sec}"
        elif sec == "http_address":
            ln = f"http_address: 127.0.0.1:{rl.free_port()}"
        elif sec == "remote_store" and remote and re.match(r"^\s+address:", ln):
            ln = f"  address: {remote}"
        elif sec == "remote_store" and remote and re.match(r"^\s+insecure:", ln):
            ln = "  insecure: true"
        elif sec == "snapshot_api" and snapshot_api and re.match(r"^\s+enabled:", ln):
            ln = "  enabled: true"
        elif sec == "snapshot_api" and snapshot_api and re.match(r"^\s+per_pid_interval:", ln):
            ln = "  per_pid_interval: 0s"
        lines.append(ln)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    # never let a test agent near /var/lib/pushprof: check what the agent will use
    r = subprocess.run([PUSHPROF, "check-config", path], capture_output=True, text=True,
                       timeout=30)
    dirs = re.findall(r"^  directory: \"?([^\"\n]*)\"?$", r.stdout, re.M)
    if not check(r.returncode == 0 and len(dirs) == 2 and all(x.startswith(d) for x in dirs)
                 and (not snapshot_api or "snapshot_api:\n  enabled: true" in r.stdout),
                 f"sandbox config {os.path.basename(path)}: valid, directories in {d}",
                 f"rc={r.returncode} dirs={dirs} {r.stderr[-300:]}"):
        raise RuntimeError("no sandbox config: not running any agent")
    return path


def effective(cfg, key_section):
    r = subprocess.run([PUSHPROF, "check-config", cfg], capture_output=True, text=True, timeout=30)
    m = re.search(rf"^{key_section}:\n  directory: \"?([^\"\n]*)\"?$", r.stdout, re.M)
    return m.group(1) if m else ""


def gzip_pprof(path):
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        if head != b"\x1f\x8b":
            return False
        with gzip.open(path) as f:
            return len(f.read()) > 0
    except OSError:
        return False


def pprof_ok(path):
    r = subprocess.run(["go", "tool", "pprof", "-raw", path], capture_output=True, text=True,
                       timeout=120, env={**os.environ, **go_env()})
    return r.returncode == 0


# set up in main(): the receiver, sandbox configs, the Go program, an agent
# serving the snapshot API (for the docs' curl)
rcv = SERVER = cfg_shipped = cfg_etc = PID = demo_dir = cfg_api = api_http = api_agent = None


def start_api_agent():
    global api_agent
    if api_agent is None:
        api_agent = pptest.Agent(cfg_api, os.path.join(d, "api-agent.log"))
        check(api_agent.started, "agent with snapshot_api for the docs' curl started",
              api_agent.log()[-500:])
        time.sleep(2)   # its first /proc scan knows the Go program
    return api_agent


def substitute(toks, cwd):
    """Sandbox a command's tokens; None when it names a placeholder we do not know."""
    out = []
    for i, t in enumerate(toks):
        if t in ("PID", "1234"):
            t = PID
        elif t == "FILE":
            t = cfg_etc
        elif t == "FILE.pb.gz":
            t = sorted(glob.glob(os.path.join(demo_dir, "*.pb.gz")))[-1]
        elif t == "/etc/pushprof/pushprof.yaml":
            t = cfg_etc
        elif t == "config/pushprof.yaml":
            t = cfg_shipped
        elif t in SERVER_NAMES:
            t = SERVER
        elif t == "$(hostname)":
            t = socket.gethostname()
        elif t.startswith(DEMO_DIR):
            t = demo_dir + t[len(DEMO_DIR):]
        elif t.startswith("/tmp/") and i > 0 and toks[i - 1] in ("--local-store",):
            t = os.path.join(d, "flag-" + os.path.basename(t))
        elif t.startswith("http://127.0.0.1:7071/"):
            t = re.sub(r"\b1234\b", PID, t.replace("127.0.0.1:7071", api_http))
        elif re.fullmatch(r"[A-Z][A-Z_]+", t) and not (i > 0 and toks[i - 1] == "-X"):
            return None
        out.append(t)
    return out


def run_pushprof(toks, where, cwd):
    args = toks[1:]
    cmd = args[0] if args else ""
    timeout = 60
    if cmd == "run":
        # Without --config the agent would read /etc/pushprof/pushprof.yaml or
        # its compiled-in copy of the shipped config, whose directories are
        # under /var/lib/pushprof: give it the shipped config, sandboxed.
        if not any(a == "--config" or a.startswith("--config=") for a in args):
            args += ["--config", cfg_shipped]
        if "--duration" in args:
            i = args.index("--duration") + 1
            if not re.fullmatch(r"\d+s", args[i]) or int(args[i][:-1]) > RUN_MAX_S:
                args[i] = f"{RUN_MAX_S}s"
        else:
            args += ["--duration", "3s"]
    before = len(rcv.series())
    r = subprocess.run([PUSHPROF, *args], capture_output=True, text=True, timeout=timeout,
                       cwd=cwd)
    ok = check(r.returncode == 0, f"{where}: exits 0", f"rc={r.returncode} {r.stderr[-600:]}")
    if not ok:
        return
    if cmd == "run":
        store = args[args.index("--local-store") + 1] if "--local-store" in args else None
        cfg = args[args.index("--config") + 1]
        store = store or effective(cfg, "local_store")
        check(not store or glob.glob(os.path.join(store, "*.pb.gz")),
              f"{where}: profiles in its local store {store}")
    if cmd == "snapshot" and "--output" in args:
        out = os.path.join(cwd, args[args.index("--output") + 1])
        check(gzip_pprof(out) and pprof_ok(out), f"{where}: wrote a pprof file go tool pprof reads")
    pushes = ("--push" in args or cmd == "push"
              or (cmd == "run" and (SERVER in args or cfg_etc in args)))
    if pushes:
        # the receiver validates a request before it records it: give it time
        end = time.time() + 30
        while len(rcv.series()) <= before and time.time() < end:
            time.sleep(0.2)
        check(len(rcv.series()) > before, f"{where}: the receiver got the profiles",
              f"{before} -> {len(rcv.series())} series")


def run_pprof(toks, where, cwd):
    args = toks[3:]
    files = []
    for a in args:
        if "*" in a:
            hits = sorted(glob.glob(a))
            check(hits, f"{where}: the pattern {a.replace(demo_dir, DEMO_DIR)} matches "
                        "profiles the agent wrote", os.listdir(os.path.dirname(a))[:5])
            if not hits:
                return
            files += hits
        else:
            files.append(a)
    env = {**os.environ, **go_env(), "PPROF_TMPDIR": os.path.join(d, "pprof")}
    http = [a for a in files if a.startswith("-http=")]
    if http:
        # a web server until stopped: bind to a free loopback port, no browser,
        # fetch its page, stop it
        files = [f"-http=127.0.0.1:{rl.free_port()}", "-no_browser"] + [
            a for a in files if not a.startswith("-http=")]
        p = subprocess.Popen(["go", "tool", "pprof", *files], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, cwd=cwd, env=env)
        procs.append(p)
        url, end = None, time.time() + 120
        while time.time() < end and p.poll() is None:
            line = p.stdout.readline()
            m = re.search(r"Serving web UI on (http://\S+)", line)
            if m:
                url = m.group(1)
                break
        status = 0
        # the line may come a moment before the server accepts (and a loaded
        # machine stretches that moment): retry while pprof runs
        deadline = time.time() + 60
        while url and time.time() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=30) as resp:
                    status = resp.status
                break
            except OSError as e:
                status = str(e)
                if p.poll() is not None:
                    break
                time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        p.wait(10)
        check(status == 200, f"{where}: serves the profile (as -http=127.0.0.1:PORT -no_browser)",
              f"url={url} status={status}")
        return
    r = subprocess.run(["go", "tool", "pprof", *files], capture_output=True, text=True,
                       timeout=120, cwd=cwd, env=env)
    check(r.returncode == 0, f"{where}: exits 0", r.stderr[-500:])


def run_curl(toks, where, cwd):
    start_api_agent()
    out = os.path.join(cwd, toks[toks.index("-o") + 1]) if "-o" in toks else None
    if out and os.path.exists(out):
        os.unlink(out)
    r = subprocess.run(toks, capture_output=True, text=True, timeout=60, cwd=cwd)
    check(r.returncode == 0 and (out is None or (gzip_pprof(out) and pprof_ok(out))),
          f"{where}: exits 0 with a heap profile go tool pprof reads",
          f"rc={r.returncode} {r.stderr[-300:]} "
          f"{open(out, 'rb').read(200) if out and os.path.exists(out) else ''}")


def run_doc_commands(path, text, min_commands, line0=0):
    rel = os.path.relpath(path, SOURCE_DIR)
    cwd = os.path.join(d, "cwd-" + os.path.basename(path))
    os.makedirs(cwd, exist_ok=True)
    n = 0
    for lang, body, line in fenced(text):
        if lang == "yaml":
            continue   # checked with every doc's YAML below
        if lang not in ("sh", "bash", "console", "shell"):
            continue
        for toks in shell_commands(body):
            n += 1
            key = " ".join(toks)
            where = f"{rel}:{line0 + line}: {key}"
            if key in SKIP:
                print(f"skip {where}: {SKIP[key]}")
                continue
            if toks[0] == "sudo":
                toks = toks[1:]
            sub = substitute(toks, cwd)
            if not check(sub is not None, f"{where}: every placeholder known to this test"):
                continue
            prog = os.path.basename(sub[0])
            if prog == "pushprof" or sub[0] == PUSHPROF:
                run_pushprof(sub, where, cwd)
            elif sub[:3] == ["go", "tool", "pprof"]:
                run_pprof(sub, where, cwd)
            elif prog == "curl":
                run_curl(sub, where, cwd)
            else:
                check(False, f"{where}: run by this test or listed in its SKIP with a reason")
    check(n >= min_commands, f"{rel}: {n} commands found (at least {min_commands})")


# `pushprof WORD` in code that is not a command line: WORD -> what it is.
NOT_COMMANDS = {
    "go": "the comment `pushprof go heap: view=...` a heap profile carries (go-heap.md)",
}


def docs_help_and_flags(paths):
    """`pushprof CMD --flag` in code anywhere in the docs (where a command
    starts: line start, after sudo, a pipe, && or ;, a path like build/):
    CMD has help, the flag is in it."""
    top = subprocess.run([PUSHPROF, "--help"], capture_output=True, text=True, timeout=30)
    known = set(re.findall(r"^  ([a-z][a-z-]+)  ", top.stdout, re.M))
    check({"run", "check-config", "snapshot", "push", "version"} <= known,
          "pushprof --help lists the commands", top.stdout)
    helps, seen = {}, set()
    for path in paths:
        text = open(path).read()
        rel = os.path.relpath(path, SOURCE_DIR)
        code = [b for _, b, _ in fenced(text)]
        code += re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
        for snippet in code:
            # a usage block's continuation lines ("    [--push] ...") join the
            # command; `a|b` inside [...] is an alternative, not a pipe
            snippet = re.sub(r"\n\s+(?=[\[-])", " ", snippet.replace("\\\n", " "))
            snippet = re.sub(r"\[[^\]\n]*\]", lambda b: b.group(0).replace("|", " "), snippet)
            for ln in snippet.splitlines():
                for m in re.finditer(r"(?:^\s*|[|;&(]\s*|sudo\s+)(?:[\w./-]*/)?pushprof\s+"
                                     r"([a-z][a-z-]*)([^|;&#]*)", ln):
                    cmd, rest = m.group(1), m.group(2)
                    if cmd in NOT_COMMANDS:
                        continue
                    if cmd == "help":   # `pushprof help CMD`: CMD is checked as a command
                        h = re.match(r"\s*([a-z][a-z-]*)", rest)
                        if not h:
                            continue
                        cmd, rest = h.group(1), ""
                    if cmd not in helps:
                        h = subprocess.run([PUSHPROF, "help", cmd], capture_output=True,
                                           text=True, timeout=30)
                        helps[cmd] = h.stdout if h.returncode == 0 and cmd in known else None
                    if (rel, cmd) not in seen:
                        seen.add((rel, cmd))
                        check(helps[cmd] is not None,
                              f"{rel}: `pushprof {cmd}` is a command (`pushprof help {cmd}`)")
                    if helps[cmd] is None:
                        continue
                    for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest):
                        if (rel, cmd, flag) in seen or flag == "--help":
                            continue
                        seen.add((rel, cmd, flag))
                        check(re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", helps[cmd]),
                              f"{rel}: `pushprof {cmd} {flag}` is in `pushprof help {cmd}`")
    check(len(seen) > 20, "commands and flags found in the docs", len(seen))


def config_keys_documented():
    """Every key `check-config` prints (the effective config: every key the
    parser knows) is in docs/configuration.md: as `a.b.c` anywhere, or as
    `b.c` / `c` in the section whose heading names `a` (`## Top level` for
    keys without a section)."""
    r = subprocess.run([PUSHPROF, "check-config", "-"], input=f"local_store: {{directory: {d}}}\n",
                       capture_output=True, text=True, timeout=30)
    keys, stack = [], []
    for ln in r.stdout.splitlines():
        m = re.match(r"^( *)([a-z_]+):(.*)$", ln)
        if not m:
            continue
        depth = len(m.group(1)) // 2
        stack[depth:] = [m.group(2)]
        if m.group(3).strip():
            keys.append(".".join(stack))
    check(r.returncode == 0 and len(keys) > 50, "check-config prints the effective config",
          f"rc={r.returncode} {len(keys)} keys {r.stderr[-300:]}")
    doc = open(os.path.join(SOURCE_DIR, "docs", "configuration.md")).read()
    sections = {}
    for part in re.split(r"^## ", doc, flags=re.M)[1:]:
        heading, _, body = part.partition("\n")
        for name in re.findall(r"`([a-z_]+)`", heading) or (["_top"] if "Top level" in heading
                                                              else []):
            sections[name] = sections.get(name, "") + body
    missing = []
    for k in keys:
        parts = k.split(".")
        sec = sections.get(parts[0], "") if len(parts) > 1 else sections.get("_top", "")
        cands = [".".join(parts[i:]) for i in range(1, len(parts))] if len(parts) > 1 else [k]
        if f"`{k}`" not in doc and not any(f"`{c}`" in sec for c in cands):
            missing.append(k)
    check(not missing, "every config key is in docs/configuration.md", missing)


def docs_yaml(paths):
    """Every YAML block of the docs is a config `check-config` accepts (a
    fragment that names no destination gets a local_store, since a config
    must name one)."""
    for path in paths:
        rel = os.path.relpath(path, SOURCE_DIR)
        for lang, body, line in fenced(open(path).read()):
            if lang != "yaml":
                continue
            text = body
            if not re.search(r"^(remote_store|local_store):", body, re.M):
                text += f"local_store: {{directory: {d}/yaml-store}}\n"
            r = subprocess.run([PUSHPROF, "check-config", "--no-file-checks", "-"], input=text,
                               capture_output=True, text=True, timeout=30)
            check(r.returncode == 0, f"{rel}:{line}: the YAML block is a valid config",
                  r.stderr[-400:])


def setup():
    global rcv, SERVER, cfg_shipped, cfg_etc, PID, demo_dir, cfg_api, api_http
    # --- the sandbox -------------------------------------------------------------------
    rcv = rl.Rcv(os.path.join(d, "rcv"), rl.free_port())
    SERVER = f"127.0.0.1:{rcv.port}"
    cfg_shipped = sandbox_config(os.path.join(d, "shipped.yaml"))
    cfg_etc = sandbox_config(os.path.join(d, "etc.yaml"), remote=SERVER)
    ready = os.path.join(d, "go-ready")
    goprog = rl.build_go("busyalloc", d)
    go = subprocess.Popen([goprog, "0", ready], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    procs.append(go)
    for _ in range(300):
        if os.path.exists(ready):
            break
        time.sleep(0.1)
    PID = str(go.pid)

    # What ./scripts/demo.sh leaves in /tmp/pushprof-demo/profiles: the shipped
    # config, the whole host, for a few seconds.
    demo = pptest.Agent(cfg_shipped, args=["--duration", "3s"])
    rc, _ = demo.wait(60)
    demo_dir = effective(cfg_shipped, "local_store")
    check(rc == 0 and glob.glob(os.path.join(demo_dir, "*.pb.gz")),
          "the demo's run (shipped config, 3 s) wrote profiles", demo.log()[-500:])
    cfg_api = sandbox_config(os.path.join(d, "api.yaml"), snapshot_api=True)
    api_http = re.search(r"^http_address: (\S+)$", open(cfg_api).read(), re.M).group(1)


try:
    setup()
    readme = os.path.join(SOURCE_DIR, "README.md")
    running = os.path.join(SOURCE_DIR, "docs", "running.md")
    using_it, line0 = section(open(readme).read(), "## Using it")
    run_doc_commands(readme, using_it, 6, line0)
    run_doc_commands(running, open(running).read(), 10)
    all_docs = [readme] + sorted(glob.glob(os.path.join(SOURCE_DIR, "docs", "*.md")))
    docs_help_and_flags(all_docs)
    docs_yaml(all_docs)
    config_keys_documented()
finally:
    if api_agent is not None:
        rc, _ = api_agent.stop()
        check(rc == 0, "the snapshot_api agent stopped cleanly", api_agent.log()[-300:])
    if rcv is not None:
        rcv.stop()
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if pptest._failures == 0:
        shutil.rmtree(d, ignore_errors=True)   # kept for a look when something failed
done()
