"""The JupyterLite site's numbers (size, start-up and redraw times) at the end of the run.

tests/lite/ measures them on a pytest-xdist worker (or in the one process without workers)
and each of its reports carries the numbers so far in ``user_properties``; this plugin,
loaded by the root ``conftest.py`` in the process that prints the summary, keeps the latest,
prints them and writes build/lite_numbers.json.
"""
import json

NUMBERS_PROPERTY = "lite_numbers"
_REPORTED = {}


def pytest_runtest_logreport(report):
    for name, value in report.user_properties:
        if name == NUMBERS_PROPERTY:
            _REPORTED.clear()
            _REPORTED.update(value)


def pytest_terminal_summary(terminalreporter, config):
    if not _REPORTED or hasattr(config, "workerinput"):
        return
    numbers = _REPORTED
    numbers_json = config.rootpath / "build" / "lite_numbers.json"
    numbers_json.parent.mkdir(exist_ok=True)
    numbers_json.write_text(json.dumps(numbers, indent=1) + "\n", encoding="utf-8")
    write = terminalreporter.write_line
    terminalreporter.section("JupyterLite site: size, start-up and redraw times")
    if "site_bytes" in numbers:
        write(f"site size on disk          {numbers['site_bytes'] / 1e6:6.1f} MB "
              f"({numbers['site_files']} files)")
    if "downloaded_bytes" in numbers:
        write(f"downloaded, first visit    {numbers['downloaded_bytes'] / 1e6:6.1f} MB "
              f"({numbers['requests']} requests, all to 127.0.0.1)")
    warm = numbers.get("warm")
    if "warm_downloaded_bytes" in numbers:
        write(f"downloaded, second visit   {numbers['warm_downloaded_bytes'] / 1e6:6.1f} MB "
              f"(notebook {warm['notebook'][:2]} after the reset; the rest from the browser's "
              "cache)")
    times = numbers.get("cold")
    if times:
        write(f"notebook 08, first visit (cold cache)   page open to kernel idle "
              f"{times['kernel_idle_s']:5.1f} s, to first trace "
              f"{times['first_trace_s']:5.1f} s, to all cells run "
              f"{times['all_cells_s']:5.1f} s")
    if warm:
        write(f"notebook {warm['notebook'][:2]}, second visit (warm cache)  page open to kernel "
              f"idle {warm['kernel_idle_s']:5.1f} s, to all cells run "
              f"{warm['all_cells_s']:5.1f} s")
    if "floor_ratio" in numbers:
        write(f"bare JupyterLite (same JupyterLite, kernel, Pyodide; nothing of ours, cold "
              f"cache): page open to a trivial cell run {numbers['bare']['kernel_ready_s']:5.1f} s")
        write(f"notebook 08's first trace (cold) / that floor  {numbers['floor_ratio']:.2f} "
              f"({numbers['cold']['first_trace_s']:.1f} s / "
              f"{numbers['bare']['kernel_ready_s']:.1f} s; at most {numbers['floor_ratio_limit']})")
    if "browser_in_front" in numbers:
        write(f"the browser's CPU weight against the test run's other processes: "
              f"{numbers['browser_in_front']} (tests/support/foreground_cpu.py)")
    if numbers.get("redraw_s"):
        redraws = numbers["redraw_s"]
        write(f"redraw after a widget change {min(redraws):.2f}-{max(redraws):.2f} s "
              f"({len(redraws)} changes)")
    for name, (seconds, kernel) in numbers.get("notebooks_s", {}).items():
        write(f"{name:<44} open + run all {seconds:5.1f} s ({kernel})")
    write(f"(written to {numbers_json.relative_to(config.rootpath)})")
