"""`pushprof check-config` against a corpus of invalid and valid configs.

Each tests/config/invalid/*.yaml starts with `# expect: <substring>`; the real
binary must exit 2 and print that substring (which includes :LINE:COL:) on
stderr. Each valid config must exit 0, and its dump must load again and dump
identically (round trip). {kmax} in an expectation is the running kernel's
kernel.perf_event_max_stack.
"""
import glob
import os
import re
import subprocess
import sys

from pptest import PUSHPROF, SOURCE_DIR, check, done, pushprof, tmpdir

HERE = os.path.join(SOURCE_DIR, "tests", "config")


def kernel_max_stack():
    try:
        with open("/proc/sys/kernel/perf_event_max_stack") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 127


KMAX = kernel_max_stack()
# A clean environment so no variable of the caller's leaks into the configs.
# Sanitizer settings (meson sets them for -Db_sanitize builds) are kept.
BASE_ENV = {"PATH": "/usr/bin:/bin"}
for _k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
    if _k in os.environ:
        BASE_ENV[_k] = os.environ[_k]
# Under -Db_sanitize=undefined a UBSan report must fail the run, not just print.
BASE_ENV.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")


def check_config(path, env=None):
    """Run check-config with only BASE_ENV (+ env) in the environment."""
    e = dict(BASE_ENV)
    if env:
        e.update(env)
    # the corpus names token and CA files of the machines it was written
    # for: lint mode (test_files.py checks the files)
    return subprocess.run([PUSHPROF, "check-config", "--no-file-checks", path],
                          capture_output=True,
                          text=True, timeout=30, env=e)


def body_after_header(text):
    """Dump without its first comment line (it names the file)."""
    return "\n".join(text.splitlines()[1:])


def round_trip(name, dump, env=None):
    d = tmpdir()
    p = os.path.join(d, "dumped.yaml")
    with open(p, "w") as f:
        f.write(dump)
    r = check_config(p, env)
    check(r.returncode == 0, f"{name}: dumped config is valid again",
          r.stderr.strip())
    check(body_after_header(r.stdout) == body_after_header(dump),
          f"{name}: dump of the dump is identical",
          f"\n--- first\n{dump}\n--- second\n{r.stdout}")
    return r.stdout


def test_invalid():
    files = sorted(glob.glob(os.path.join(HERE, "invalid", "*.yaml")))
    check(len(files) >= 35, f"at least 35 invalid configs ({len(files)})")
    for path in files:
        name = os.path.basename(path)
        with open(path, "rb") as f:
            first = f.readline().decode()
        if not check(first.startswith("# expect: "), f"{name}: has an expectation"):
            continue
        want = first[len("# expect: "):].rstrip("\n").replace("{kmax}", str(KMAX))
        r = check_config(path)
        check(r.returncode == 2, f"{name}: exit status 2 ({r.returncode})", r.stdout[:200])
        check(r.stdout == "", f"{name}: nothing on stdout")
        check(r.stderr.startswith("pushprof: " + path + ":"),
              f"{name}: error starts with 'pushprof: FILE:'", r.stderr.strip())
        check(want in r.stderr, f"{name}: stderr has {want!r}", r.stderr.strip())


def test_valid():
    files = sorted(glob.glob(os.path.join(HERE, "valid", "*.yaml")))
    check(len(files) >= 3, f"valid configs present ({len(files)})")
    env = {"PP_TEST_CLUSTER": "eu-1", "PP_TEST_TENANT": "team-a"}
    for path in files:
        name = os.path.basename(path)
        r = check_config(path, env)
        check(r.returncode == 0, f"{name}: valid (exit 0)", r.stderr.strip())
        check(r.stderr == "", f"{name}: nothing on stderr", r.stderr.strip())
        if r.returncode == 0:
            round_trip(name, r.stdout, env)


# check-config refuses a config with nowhere to put profiles; dump_of adds
# this to a text that names neither store (after it: positions unchanged)
DEST = "local_store: {directory: /var/lib/pushprof/test-profiles}\n"


def dump_of(text, env=None, dest=True):
    d = tmpdir()
    p = os.path.join(d, "c.yaml")
    if dest and "remote_store" not in text and "local_store" not in text:
        text += DEST
    with open(p, "w") as f:
        f.write(text)
    return check_config(p, env)


def value(dump, key):
    """Value of the first `key:` line in a dump (top level or nested)."""
    for line in dump.splitlines():
        s = line.strip()
        if s.startswith(key + ":"):
            return s[len(key) + 1:].strip()
    return None


def test_env_expansion():
    r = dump_of("node: ${NODE_NAME:-x}\n")
    check(r.returncode == 0 and value(r.stdout, "node") == '"x"',
          "${NODE_NAME:-x} with NODE_NAME unset -> x", r.stdout + r.stderr)
    r = dump_of("node: ${NODE_NAME:-x}\n", {"NODE_NAME": "worker-7"})
    check(value(r.stdout, "node") == '"worker-7"', "${NODE_NAME:-x} with NODE_NAME set",
          r.stdout + r.stderr)
    r = dump_of("node: ${NODE_NAME:-x}\n", {"NODE_NAME": ""})
    check(value(r.stdout, "node") == '"x"', "${VAR:-x} with VAR empty -> default")
    r = dump_of("cpu: {}\n", {"NODE_NAME": "from-env"})
    check(value(r.stdout, "node") == '"from-env"',
          "no node key: NODE_NAME is the default", r.stdout + r.stderr)
    host = os.uname().nodename
    r = dump_of("node: ${PP_UNSET_VAR}\n")
    check(value(r.stdout, "node") == f'"{host}"',
          "unset ${VAR} -> empty node -> hostname", r.stdout + r.stderr)
    r = dump_of("node: a$$b-${PP_A}-$PP_A\n", {"PP_A": "1"})
    check(value(r.stdout, "node") == '"a$$b-1-$$PP_A"',
          "$$ is a literal $, $NAME without braces is kept (dumped with $ doubled)",
          r.stdout + r.stderr)
    if r.returncode == 0:
        again = round_trip("literal $", r.stdout, {"PP_A": "other"})
        check(value(again, "node") == '"a$$b-1-$$PP_A"',
              "a dumped literal $ is not expanded again")
    # Value containing ${...} from the environment is not re-expanded.
    r = dump_of("node: ${PP_B}\n", {"PP_B": "${HOME}"})
    check(value(r.stdout, "node") == '"$${HOME}"', "expansion is not recursive",
          r.stdout + r.stderr)
    # Regexes are not expanded: $ is an anchor there.
    r = dump_of("targets:\n  - comm_regex: ^(api|$$X)$\n", {"X": "zzz"})
    check(r.returncode == 0 and '"^(api|$$X)$"' in r.stdout,
          "regexes are taken literally (no ${VAR} expansion)", r.stdout + r.stderr)
    r = dump_of("external_labels:\n  cluster: ${PP_CLUSTER}\n")
    check(r.returncode == 2 and ":2:12: external_labels.cluster: label value is empty" in r.stderr,
          "external label from an unset variable is an error", r.stderr)
    r = dump_of("cpu:\n  frequency_hz: ${HZ}\n", {"HZ": "99"})
    check(r.returncode == 2 and "expected an integer" in r.stderr,
          "no expansion outside string values", r.stderr)


def test_cli():
    d = tmpdir()
    missing = os.path.join(d, "does-not-exist.yaml")
    r = pushprof("check-config", missing)
    check(r.returncode == 2 and missing in r.stderr and "No such file or directory" in r.stderr,
          "missing file: exit 2, path and strerror", r.stderr)
    r = pushprof("check-config", d)
    check(r.returncode == 2 and d in r.stderr, "directory: exit 2 with path", r.stderr)
    r = pushprof("check-config", "-", input="cpu:\n  frequency_hz: 5000\n")
    check(r.returncode == 2 and "pushprof: <stdin>:2:17: cpu.frequency_hz" in r.stderr,
          "- reads stdin; errors name <stdin>", r.stderr)
    r = pushprof("check-config", "-", input="node: from-stdin\n" + DEST)
    check(r.returncode == 0 and value(r.stdout, "node") == '"from-stdin"', "- reads stdin",
          r.stdout + r.stderr)
    # every error in one run, one FILE:LINE:COL line each, in file order
    r = pushprof("check-config", "-", input=("cpu:\n  frequency_hz: 5000\n  bogus: 1\n"
                                             "node: [a]\nremote_store:\n  timeout: 10 parsecs\n"
                                             "log: {level: loud}\n"))
    lines = r.stderr.strip().splitlines()
    want = ["<stdin>:2:17: cpu.frequency_hz", "<stdin>:3:3: unknown key 'bogus'",
            "<stdin>:4:7: node:", "<stdin>:6:12: remote_store.timeout:", "<stdin>:7:14: log.level:"]
    check(r.returncode == 2 and len(lines) == len(want)
          and all(w in ln for w, ln in zip(want, lines)),
          "five errors: all reported, each with its position", r.stderr)
    r = pushprof("check-config", "--help")
    check(r.returncode == 0 and "usage: pushprof check-config" in r.stdout,
          "--help: usage on stdout, exit 0", r.stdout + r.stderr)
    r = pushprof("check-config")
    check(r.returncode == 2 and "usage" in r.stderr, "no FILE: usage, exit 2")
    r = pushprof("check-config", "--bogus", "x")
    check(r.returncode == 2 and "--bogus" in r.stderr, "unknown option: exit 2")
    r = pushprof("check-config", "a.yaml", "b.yaml")
    check(r.returncode == 2, "two files: exit 2")
    big = os.path.join(d, "big.yaml")
    with open(big, "w") as f:
        f.write("# " + "x" * (5 << 20) + "\n")
    r = pushprof("check-config", big)
    check(r.returncode == 2 and "larger than" in r.stderr, "oversized file refused", r.stderr)
    r = dump_of("targets: [" + ",".join(["{pids: [1]}"] * 40000) + "]\n")
    check(r.returncode == 2 and "more than 100000 YAML nodes" in r.stderr,
          "node count bounded", r.stderr)
    r = dump_of("cpu: " + "[" * 100 + "]" * 100 + "\n")
    check(r.returncode == 2 and ":1:" in r.stderr and "nesting deeper than 32 levels" in r.stderr,
          "nesting depth bounded", r.stderr)


def test_default_config():
    path = os.path.join(SOURCE_DIR, "config", "pushprof.yaml")
    r = check_config(path)
    check(r.returncode == 0, "config/pushprof.yaml is valid", r.stderr)
    out = r.stdout
    check(value(out, "address") == '""', "default: no remote store")
    check('directory: "/var/lib/pushprof/profiles"' in out,
          "default: local store in /var/lib/pushprof/profiles")
    check(value(out, "targets") == "[]", "default: whole host (no targets)")
    cpu = out[out.index("\ncpu:"):]
    check(value(cpu, "enabled") == "true", "default: cpu on")
    gh = out[out.index("\ngo_heap:"):]
    check(value(gh, "enabled") == "true", "default: go_heap on")
    if r.returncode == 0:
        round_trip("config/pushprof.yaml", out)
    r = check_config(path, {"PUSHPROF_LOCAL_STORE": "/tmp/demo/profiles",
                            "NODE_NAME": "node-a"})
    check('directory: "/tmp/demo/profiles"' in r.stdout and value(r.stdout, "node") == '"node-a"',
          "default config: PUSHPROF_LOCAL_STORE and NODE_NAME from the environment",
          r.stdout + r.stderr)
    # Empty and comment-only files are all defaults, and the built-in
    # default for local_store.directory is "": nowhere to put profiles
    for text, pos in (("", "1:1"), ("# nothing here\n", "1:1"), ("---\n", "2:1"),
                      ("~\n", "1:1")):
        r = dump_of(text, dest=False)
        check(r.returncode == 2 and r.stdout == ""
              and f":{pos}: nowhere to put profiles: remote_store.address and "
                  "local_store.directory are both empty" in r.stderr
              and "--remote-store-address or --local-store" in r.stderr,
              f"{text!r}: refused, naming both keys and both flags", r.stderr)
    r = pushprof("check-config", "-", input="node: n\n")
    check(r.returncode == 2 and "pushprof: <stdin>:1:1: nowhere to put profiles" in r.stderr,
          "stdin without a store: refused at <stdin>:1:1", r.stderr)
    # one store is enough, either one
    r = dump_of('remote_store: {address: "parca:7070"}\nlocal_store: {directory: ""}\n')
    check(r.returncode == 0 and value(r.stdout, "directory") == '""',
          "remote_store.address alone is a destination", r.stderr)
    r = dump_of('remote_store: {address: ""}\nlocal_store: {directory: /p}\n')
    check(r.returncode == 0, "local_store.directory alone is a destination", r.stderr)
    # the spool holds what the remote store has not taken yet: not a destination
    r = dump_of("spool: {directory: /var/lib/pushprof/spool}\n", dest=False)
    check(r.returncode == 2 and ":1:1: nowhere to put profiles" in r.stderr,
          "a spool alone is not a destination", r.stderr)
    # another error first: "nowhere" would only be its consequence
    r = dump_of("remote_stor: {address: \"parca:7070\"}\n", dest=False)
    check(r.returncode == 2 and "did you mean 'remote_store'" in r.stderr
          and "nowhere" not in r.stderr, "a misspelt store: its own error only", r.stderr)
    e = dump_of("")
    c = dump_of("# nothing here\n")
    dd = dump_of("---\n")
    check(e.returncode == 0 and body_after_header(e.stdout) == body_after_header(c.stdout)
          == body_after_header(dd.stdout), "a store alone / with a comment / after --- = defaults")
    check(value(e.stdout, "frequency_hz") == "19" and value(e.stdout, "interval") == "10s",
          "defaults: 19 Hz, 10s windows")


def test_unknown_meta_warning():
    """A rule reading a __meta_* label pushprof never sets is warned about
    (a typo, or a label of another discovery), and only that one."""
    text = ("relabel_configs:\n"
            "- {source_labels: [__meta_kubernetes_node_label_zone], target_label: zone}\n"
            "- {source_labels: [__meta_kubernetes_pod_controller_name], target_label: ctl}\n"
            "- {source_labels: [__meta_kubernetes_node_labell_x], target_label: x}\n")
    r = dump_of(DEST + text, dest=False)
    warned = sorted(set(re.findall(r"source_labels: (__meta_\w+) is never set", r.stderr)))
    check(r.returncode == 0 and warned == ["__meta_kubernetes_node_labell_x",
                                           "__meta_kubernetes_pod_controller_name"],
          "a warning for each __meta_* label never set, none for node labels", r.stderr)


def test_parca_relabel_files():
    """Parca Agent's shipped relabel files load unchanged."""
    files = sorted(glob.glob(os.path.join(SOURCE_DIR, "tests", "relabel", "parca", "*.yaml")))
    check(len(files) >= 2, f"Parca Agent relabel files present ({len(files)})")
    for path in files:
        name = "parca/" + os.path.basename(path)
        with open(path) as f:
            text = f.read()
        r = dump_of(DEST + text, dest=False)
        check(r.returncode == 0, f"{name}: loads (exit 0)", r.stderr.strip())
        want = sum(1 for ln in text.splitlines() if ln.startswith("- "))
        got = sum(1 for ln in r.stdout.splitlines() if ln.startswith("  - action: "))
        check(got == want, f"{name}: {want} rules in the dump ({got})")
        # every __meta_* label they read is one pushprof sets: no warning
        warned = sorted(set(re.findall(r"source_labels: (__meta_\w+) is never set", r.stderr)))
        check(warned == [], f"{name}: no warning about a __meta_* label never set",
              f"warned {warned}")
        if r.returncode == 0:
            round_trip(name, r.stdout)


def main():
    if not os.path.exists(PUSHPROF):
        print(f"binary {PUSHPROF} missing")
        sys.exit(1)
    test_invalid()
    test_valid()
    test_env_expansion()
    test_cli()
    test_default_config()
    test_unknown_meta_warning()
    test_parca_relabel_files()
    done()


if __name__ == "__main__":
    main()
