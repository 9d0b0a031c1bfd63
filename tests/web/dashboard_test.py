#!/usr/bin/env python3
"""Browser test of the live dashboard: headless Chromium (Debian package `chromium`), driven over
the DevTools protocol, against `surge dashboard` replaying synthetic buckets.

Checks that the page loads its charting library, that the hot list fills (ranks, Chinese hashtags,
sparklines, sentiment bars), that it then updates live over SSE, that the topic panel shows a heat
chart and sample posts, that the health strip fills, that the page reconnects after the server
restarts, and that nothing threw. Saves screenshots to --out. Exits 77 (ctest: skipped) when
Chromium is not installed.

    python3 tests/web/dashboard_test.py --surge build/release/bin/surge --out build/release/web
    python3 tests/web/dashboard_test.py --url http://127.0.0.1:8080/ --out DIR   # a running one
"""
import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import synthetic  # noqa: E402

SKIP = 77
WAIT_S = 45  # upper bound for any one wait: a guard against hangs, not a speed check


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)
    print("  ok:", what)


def wait_for(fn, what, limit=WAIT_S):
    until = time.monotonic() + limit
    last = None
    while time.monotonic() < until:
        last = fn()
        if last:
            print("  ok:", what)
            return last
        time.sleep(0.1)
    raise Failure("%s (not within %d s; last value %r)" % (what, limit, last))


def read_until(stream, pattern):
    """The first match of `pattern` in the lines of `stream` (a child's pipe), or None at EOF."""
    until = time.monotonic() + WAIT_S
    while time.monotonic() < until:
        line = stream.readline()
        if not line:
            return None
        m = re.search(pattern, line)
        if m:
            return m.group(1)
    return None


def stop_process(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Dashboard:
    """`surge dashboard` in a child process."""

    def __init__(self, surge, trends, posts, port=0, speed=60):
        self.proc = subprocess.Popen(
            [surge, "dashboard", "--trends", trends, "--posts", posts, "--port", str(port),
             "--replay-speed", str(speed), "--loop"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.url = read_until(self.proc.stdout, r"dashboard: (http://\S+/)")
        if not self.url:
            self.stop()
            raise Failure("surge dashboard did not start")
        self.port = int(self.url.rsplit(":", 1)[1].strip("/"))

    def stop(self):
        stop_process(self.proc)


class Browser:
    """Headless Chromium with one page, over the DevTools protocol."""

    def __init__(self, chromium, profile):
        try:
            import websocket  # websocket-client, from tools/requirements.txt
        except ImportError:
            raise Failure("the Python package websocket-client is missing (tools/requirements.txt; "
                          "scripts/setup installs it into .venv)")

        self.proc = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
             "--remote-allow-origins=*", "--user-data-dir=" + profile,
             "--window-size=1440,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        endpoint = read_until(self.proc.stderr, r"DevTools listening on (ws://\S+)")
        if not endpoint:
            self.close()
            raise Failure("chromium did not open its DevTools endpoint")
        # Keep draining stderr so Chromium never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        port = re.search(r"ws://[^:/]+:(\d+)/", endpoint).group(1)
        with urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port, timeout=10) as r:
            pages = [t for t in json.load(r) if t.get("type") == "page"]
        if not pages:
            raise Failure("chromium has no page target")
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=WAIT_S,
                                              suppress_origin=True)
        self.next_id = 0
        self.exceptions = []
        self.console_errors = []
        for method in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.call(method)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": 1440, "height": 1000, "deviceScaleFactor": 1, "mobile": False})

    def _event(self, msg):
        method = msg.get("method")
        params = msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            self.exceptions.append(params["exceptionDetails"].get("text", "") + " " +
                                   json.dumps(params["exceptionDetails"].get("exception", {}))[:300])
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.console_errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                                for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.console_errors.append(params["entry"].get("text", "") + " " +
                                       params["entry"].get("url", ""))

    def call(self, method, params=None):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise Failure("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            self._event(msg)

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in r:
            raise Failure("evaluating %s: %s" % (expr[:60], r["exceptionDetails"]))
        return r["result"].get("value")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        print("  screenshot:", path)

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        stop_process(self.proc)


PAGE_STATE = r"""(function () {
  // Still loading: the body, or any element read below by id, not there yet.
  var ids = ['bucket', 'd-title', 'h-buckets', 'h-model', 'h-source', 'notice'];
  if (!document.body || ids.some(function (id) { return !document.getElementById(id); })) {
    return null;
  }
  var rows = Array.prototype.slice.call(document.querySelectorAll('#hot tbody tr'));
  return {
    hasD3: !!(window.surgeDashboard && window.surgeDashboard.hasD3),
    conn: document.body.dataset.conn || '',
    seq: Number(document.body.dataset.seq || 0),
    events: Number(document.body.dataset.events || 0),
    bucket: document.getElementById('bucket').textContent,
    rows: rows.map(function (r) {
      var cells = r.querySelectorAll('td');
      return {
        topic: r.dataset.topic,
        rank: cells[0].textContent,
        move: cells[1].textContent,
        hashtag: r.querySelector('.hashtag').textContent,
        heat: cells[3].textContent,
        spark: (r.querySelector('path.spark-line') || {getAttribute: function () { return ''; }})
            .getAttribute('d') || '',
        senti: r.querySelectorAll('svg.senti rect').length,
        category: cells[5].textContent,
      };
    }),
    detailTitle: document.getElementById('d-title').textContent,
    heatLine: (document.querySelector('#d-chart path.heat-line') ||
               {getAttribute: function () { return ''; }}).getAttribute('d') || '',
    heatDots: document.querySelectorAll('#d-chart circle.heat-dot').length,
    samples: Array.prototype.map.call(document.querySelectorAll('#d-samples .sample-text'),
                                      function (e) { return e.textContent; }),
    health: {
      buckets: document.getElementById('h-buckets').textContent,
      model: document.getElementById('h-model').textContent,
      source: document.getElementById('h-source').textContent,
    },
    notice: document.getElementById('notice').hidden ? '' : document.getElementById('notice').textContent,
  };
})()"""

CJK = re.compile(r"[\u4e00-\u9fff]")


def get_json(url, path):
    with urllib.request.urlopen(url.rstrip("/") + path, timeout=10) as r:
        return json.load(r)


def check_page(browser, url, out, known=None):
    """The checks that hold for any running pipeline: fills, updates, panel, health. `known`:
    the hashtags the rows must come from (None: any non-empty hashtag)."""
    print("dashboard fills and updates")
    browser.call("Page.navigate", {"url": url})
    state = wait_for(lambda: (lambda s: s if s and s["rows"] and s["conn"] == "live" else None)(
        browser.eval(PAGE_STATE)), "the hot list fills over a live stream")
    rows = state["rows"]
    check(state["hasD3"], "the charting library (libjs-d3) loaded")
    check(not state["notice"], "no warning notice on the page")
    check([r["rank"] for r in rows] == [str(i) for i in range(1, len(rows) + 1)],
          "ranks 1..%d in order" % len(rows))
    if known is not None:
        check(len(rows) == 10, "10 rows shown (%d)" % len(rows))
        check(all(r["hashtag"] in known and CJK.search(r["hashtag"]) for r in rows),
              "every row shows a Chinese hashtag from the replayed file")
    else:
        check(all(r["hashtag"] for r in rows), "every row shows a hashtag")
    check(all(r["spark"].startswith("M") for r in rows), "every row has a heat sparkline")
    check(all(r["senti"] == 3 for r in rows), "every row has a 3-part sentiment bar")
    check(all(r["category"] for r in rows), "every row shows its category")
    first_seq, first_bucket = state["seq"], state["bucket"]
    first_rows = [(r["topic"], r["heat"]) for r in rows]
    state = wait_for(lambda: (lambda s: s if s["seq"] > first_seq and s["rows"] else None)(
        browser.eval(PAGE_STATE)), "the hot list updates live (a later bucket arrives)")
    check(state["bucket"] != first_bucket,
          "the bucket shown moved on (%s -> %s)" % (first_bucket, state["bucket"]))
    check([(r["topic"], r["heat"]) for r in state["rows"]] != first_rows, "the rows changed with it")
    wait_for(lambda: any(r["move"][:1] in ("↑", "↓") for r in browser.eval(PAGE_STATE)["rows"]),
             "rank moves (↑/↓) are shown")
    api = get_json(url, "/v1/trends")
    check(api["trends"] and (known is None or api["trends"][0]["hashtag"] in known),
          "the API serves the hot list too")

    print("topic panel and health strip")
    state = wait_for(lambda: (lambda s: s if s["heatLine"] else None)(browser.eval(PAGE_STATE)),
                     "the topic panel shows a heat chart")
    if known is not None:
        state = wait_for(lambda: (lambda s: s if s["samples"] else None)(browser.eval(PAGE_STATE)),
                         "and sample posts")
        check(any(CJK.search(t) for t in state["samples"]), "sample posts show Chinese text")
        check("replay" in state["health"]["source"], "the health strip shows the source")
    check(state["health"]["buckets"] not in ("", "—"), "the health strip shows the buckets")
    if len(state["rows"]) >= 3:
        third = state["rows"][2]
        browser.eval("document.querySelectorAll('#hot tbody tr')[2].click()")
        wait_for(lambda: browser.eval(PAGE_STATE)["detailTitle"] == third["hashtag"],
                 "clicking a row shows that topic (%s)" % third["hashtag"])
        wait_for(lambda: browser.eval(PAGE_STATE)["heatDots"] >= 1,
                 "its heat chart has points for its buckets")
    browser.screenshot(os.path.join(out, "dashboard.png"))


def check_no_errors(browser):
    # A lost connection is reported by Chromium as an error for the stream URL.
    errors = [e for e in browser.console_errors if "/v1/trends/stream" not in e]
    check(not browser.exceptions, "no uncaught exception on the page %s" % browser.exceptions)
    check(not errors, "no console error %s" % errors)


def run(args):
    chromium = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIP: chromium is not installed (Debian package chromium; scripts/setup installs it)")
        return SKIP
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="surge_web_test_")
    dash = browser = None
    try:
        if args.url:  # a dashboard that is already running (e.g. `surge demo`)
            browser = Browser(chromium, os.path.join(tmp, "profile"))
            check_page(browser, args.url, args.out)
            check_no_errors(browser)
            return 0

        sys.argv = ["synthetic", "--out", tmp, "--buckets", "30", "--top", "10"]
        synthetic.main()
        trends = os.path.join(tmp, "trends.jsonl")
        posts = os.path.join(tmp, "posts.jsonl")
        known = {json.loads(line)["hashtag"] for line in open(trends, encoding="utf-8")}

        print("bad input to surge dashboard")
        bad = os.path.join(tmp, "bad.jsonl")
        with open(bad, "w") as f:
            f.write("not json\n{\"topic_id\":\"t1\"}\n")
        r = subprocess.run([args.surge, "dashboard", "--trends", bad, "--port", "0"],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 2, "a trends file with no usable line exits 2")
        check("no usable trend update in 2 lines" in r.stderr and "line 1" in r.stderr,
              "and says why, naming the line (%s)" % r.stderr.strip()[:120])

        dash = Dashboard(args.surge, trends, posts)
        browser = Browser(chromium, os.path.join(tmp, "profile"))
        check_page(browser, dash.url, args.out, known)

        print("reconnects after the server restarts")
        events = browser.eval(PAGE_STATE)["events"]
        port = dash.port
        dash.stop()
        wait_for(lambda: browser.eval(PAGE_STATE)["conn"] != "live", "the page notices the loss")
        dash = Dashboard(args.surge, trends, posts, port=port)
        wait_for(lambda: (lambda s: s["conn"] == "live" and s["events"] > events)(
            browser.eval(PAGE_STATE)), "it reconnects and receives buckets again")
        browser.screenshot(os.path.join(args.out, "dashboard_reconnected.png"))
        check_no_errors(browser)
        return 0
    finally:
        if browser:
            browser.close()
        if dash:
            dash.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--surge", help="the surge binary (for the replayed synthetic buckets)")
    ap.add_argument("--url", help="check a dashboard already running there instead (e.g. the demo)")
    ap.add_argument("--out", required=True, help="folder for the screenshots")
    ap.add_argument("--chromium", help="browser binary (default: chromium on PATH)")
    args = ap.parse_args()
    if not args.surge and not args.url:
        ap.error("give --surge (replay synthetic buckets) or --url (a running dashboard)")
    try:
        rc = run(args)
    except Failure as e:
        print("FAIL:", e)
        print("0 passed, 1 failed")
        return 1
    if rc == 0:
        print("1 passed, 0 failed")
    return rc


if __name__ == "__main__":
    sys.exit(main())
