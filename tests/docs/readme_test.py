#!/usr/bin/env python3
"""The README's commands, run as a user would run them, so the README cannot rot.

Every ```sh block of README.md runs, in order, in one bash session (set -euo pipefail) from the
repository root, with the surge binary under test first on PATH. The first block's two commands
are special: `scripts/test` is what CI runs (.ci/run), so it is checked to be that and not run
again from inside the test suite; `scripts/demo` runs with arguments that keep it short and
headless. Background jobs a block leaves running are ended when the script exits.

    python3 tests/docs/readme_test.py --bin build/release/bin
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO_ARGS = "--plain --no-dashboard --duration 3m --speed 0"


def blocks(text):
    return re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="folder holding the surge binary under test")
    ap.add_argument("--timeout", type=int, default=480)
    a = ap.parse_args()
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    sh = blocks(readme)
    if len(sh) < 5:
        print(f"FAIL: README.md has {len(sh)} sh blocks; expected the examples")
        return 1
    first = [l.split("#")[0].strip() for l in sh[0].splitlines() if l.split("#")[0].strip()]
    if first != ["scripts/demo", "scripts/test"]:
        print(f"FAIL: the README must open with scripts/demo and scripts/test, got {first}")
        return 1
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    if "scripts/test" not in ci:
        print("FAIL: .ci/run does not run scripts/test, which the README says CI runs")
        return 1
    bindir = os.path.abspath(a.bin)
    body = "\n".join(sh[1:]).replace("build/release/bin", bindir)
    script = "\n".join([
        "set -euo pipefail",
        "trap 'jobs -p | xargs -r kill 2>/dev/null || true' EXIT",
        f'export PATH="{bindir}:$PATH"',
        "rm -rf out",
        "set -x",
        f"scripts/demo {DEMO_ARGS}",
        body,
    ])
    env = dict(os.environ)
    env.pop("TERM", None)
    # Its own session, so that on a timeout the background jobs the blocks started (servers,
    # Kafka workers) end with the shell instead of outliving the test.
    proc = subprocess.Popen(["bash", "-c", script], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=a.timeout)
        r = subprocess.CompletedProcess(proc.args, proc.returncode, out)
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, _ = proc.communicate(timeout=10)
                break
            except subprocess.TimeoutExpired:
                out = ""
        print((out or "")[-20000:])
        print(f"FAIL: the README commands were still running after {a.timeout} s; the trace above "
              "shows the one that hung")
        return 1
    print(r.stdout[-20000:])
    if r.returncode != 0:
        print(f"FAIL: a README command failed (exit {r.returncode}); the trace above shows which")
        return 1
    # What the examples must have produced.
    for path in ["out/bert.plan", "out/bert_int8.plan", "out/trends.jsonl", "out/truth.json"]:
        if not os.path.exists(os.path.join(ROOT, path)):
            print(f"FAIL: the README examples did not produce {path}")
            return 1
    for needle in ["precision@10", "hashtag", "throughput"]:
        if needle not in r.stdout:
            print(f"FAIL: expected '{needle}' in the output of the README commands")
            return 1
    shutil.rmtree(os.path.join(ROOT, "out"), ignore_errors=True)
    print(f"all {len(sh)} README blocks ran and produced what they promise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
