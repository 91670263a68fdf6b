"""What headless Chromium costs while nothing happens: a loaded JupyterLab page, a blank page,
and no browser at all, side by side.  Why the browser tests' JupyterLab and Chromium close
after the last test of tests/browser/ (a package-scoped fixture) rather than at the end of the
pytest worker, which goes on running other units for minutes.

    .venv/bin/python bench/idle_browser.py [--rounds 3] [--seconds 20]

Each round starts JupyterLab (tests/support/lab_driver.py's LabServer, as the tests do) and one
Chromium, loads JupyterLab in a page, then measures over ``--seconds`` with nothing to do: the
CPU of Chromium's processes and of the Jupyter server's, with JupyterLab loaded, then with the
page on about:blank.  The medians over the rounds are printed, per minute, with their ratio
to JupyterLab's.
"""
import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.lab_driver import VIEWPORT, LabServer, chromium_for_tests  # noqa: E402


def cpu_seconds(processes) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def idle_cpu(seconds):
    """CPU (s) of Chromium's processes and of the Jupyter server's (this process's other
    children) over ``seconds`` of nothing."""
    children = psutil.Process().children(recursive=True)
    browser = [p for p in children if "chrom" in p.name()]
    server = [p for p in children if p not in browser and "node" not in p.name()]
    before = cpu_seconds(browser), cpu_seconds(server)
    time.sleep(seconds)
    return cpu_seconds(browser) - before[0], cpu_seconds(server) - before[1]


def one_round(seconds):
    with tempfile.TemporaryDirectory() as folder:
        server = LabServer(Path(folder)).start()
        try:
            with chromium_for_tests() as browser:
                page = browser.new_context(viewport=VIEWPORT).new_page()
                page.goto(server.lab_url())
                page.wait_for_selector(".jp-LabShell", timeout=120_000)
                time.sleep(5)   # the first requests and drawing after the load
                loaded = idle_cpu(seconds)
                page.goto("about:blank")
                time.sleep(2)
                blank = idle_cpu(seconds)
        finally:
            server.stop()
    return loaded, blank


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    rounds = [one_round(args.seconds) for _ in range(args.rounds)]
    per_minute = 60.0 / args.seconds
    rows = {"JupyterLab loaded": [r[0] for r in rounds], "about:blank": [r[1] for r in rounds]}
    medians = {name: (statistics.median(b for b, _ in values) * per_minute,
                      statistics.median(s for _, s in values) * per_minute)
               for name, values in rows.items()}
    lab = medians["JupyterLab loaded"][0]
    print(f"idle CPU per minute, median of {args.rounds} rounds of {args.seconds:.0f} s "
          f"(a closed browser: 0 s)")
    for name, (browser, server) in medians.items():
        print(f"  {name:18s} Chromium {browser:5.2f} s ({browser / lab:4.2f}x)   "
              f"Jupyter server {server:5.2f} s")


if __name__ == "__main__":
    main()
