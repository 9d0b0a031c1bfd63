#!/usr/bin/env python3
"""Browser test of `surge demo`: starts the demo (simulator -> pipeline with the bundled demo
model -> dashboard) on a free port, opens its dashboard in headless Chromium while the stream
runs, and checks that the hot list fills and then updates live (the checks of dashboard_test.py's
--url mode). Then the demo must finish on its own with exit 0 and print its evaluation. Exits 77
(ctest: skipped) when Chromium is not installed.

    python3 tests/web/demo_browser_test.py --surge build/release/bin/surge --out build/release/web
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dashboard_test as dt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--surge", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIP: chromium is not installed (Debian package chromium; scripts/setup installs it)")
        return dt.SKIP
    os.makedirs(a.out, exist_ok=True)
    # 15 simulated minutes at 30x: a bucket every 2 s of wall time, about 30 s in all.
    demo = subprocess.Popen([a.surge, "demo", "--plain", "--port", "0", "--duration", "15m",
                             "--speed", "30", "--hold-seconds", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    url = None
    tmp = tempfile.mkdtemp(prefix="surge_demo_test_")
    browser = None
    try:
        for line in demo.stdout:
            lines.append(line)
            m = re.match(r"dashboard: (http://\S+)", line)
            if m:
                url = m.group(1)
                break
        dt.check(url is not None, "the demo prints its dashboard address (%s)" % "".join(lines))
        reader = threading.Thread(target=lambda: lines.extend(demo.stdout), daemon=True)
        reader.start()
        browser = dt.Browser(chromium, os.path.join(tmp, "profile"))
        dt.check_page(browser, url, a.out)
        shutil.move(os.path.join(a.out, "dashboard.png"), os.path.join(a.out, "demo.png"))
        dt.check_no_errors(browser)
        rc = demo.wait(timeout=240)
        reader.join(timeout=10)
        out = "".join(lines)
        dt.check(rc == 0, "the demo finishes with exit 0 (%d)" % rc)
        dt.check("evaluation against the simulator's ground truth" in out and "precision@10" in out,
                 "and prints its evaluation")
        dt.check(re.search(r"model demo on 1 post in \d+", out) is not None,
                 "it ran the bundled demo model")
        print(out[-1500:])
        print("1 passed, 0 failed")
        return 0
    except dt.Failure as e:
        print("FAIL:", e)
        print("".join(lines)[-3000:])
        print("0 passed, 1 failed")
        return 1
    finally:
        if browser:
            browser.close()
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
