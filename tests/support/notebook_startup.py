"""Under pytest, check every figure a notebook draws for legibility and log kernel memory.

tests/support/notebook_checks.py points ``PYTHONSTARTUP`` here and ``IPU_LEGIBILITY_LOG`` at a log
file; IPython kernels run ``PYTHONSTARTUP`` when they start.  After each cell, and whenever a
figure is displayed, each figure not yet checked (or changed since) goes through
``ipu_emulator.views.legibility.figure_problems``; one JSON line per figure is appended to
the log (cell, figure, seconds, problems) and the plugin fails the cell's test when it
found problems.

With ``IPU_RESOURCE_LOG`` set, it also logs the kernel's peak memory after each cell (one
JSON line), which the plugin checks against the classroom limits.

Silent and harmless: without ``IPU_LEGIBILITY_LOG``, outside IPython or before matplotlib is
imported it does nothing; it never prints (errors go to the log, as problems); it leaves no
names in the notebook's namespace; matplotlib is never imported by it.
"""


def _log_and_shell(variable):
    """(the log file named by the environment ``variable``, this IPython shell), or
    (None, None) when either is missing: then a hook has nothing to do."""
    import os

    log_path = os.environ.get(variable)
    if not log_path:
        return None, None
    try:
        from IPython import get_ipython
    except ImportError:
        return None, None
    shell = get_ipython()
    return (log_path, shell) if shell is not None else (None, None)


def _install_legibility_hook(log_and_shell=_log_and_shell):  # bound now: the name is deleted below
    import json
    import sys
    import time
    import weakref

    log_path, shell = log_and_shell("IPU_LEGIBILITY_LOG")
    if shell is None:
        return

    checked = weakref.WeakSet()  # figures checked and not changed since (fig.stale is False)
    cell = {"source": ""}

    def check(fig):
        if fig in checked and not fig.stale:
            return
        checked.add(fig)
        started = time.perf_counter()
        try:
            from ipu_emulator.views.legibility import figure_problems
            problems = figure_problems(fig)
        except Exception as error:  # a broken check must show, not pass silently
            problems = [f"the legibility check failed: {type(error).__name__}: {error}"]
        first_line = next(iter(cell["source"].strip().splitlines()), "")
        record = {"cell": first_line[:80], "figure": repr(fig),
                  "seconds": round(time.perf_counter() - started, 4), "problems": problems}
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")

    def remember_cell(info):
        cell["source"] = getattr(info, "raw_cell", "") or ""

    def check_open_figures():
        # Registered before matplotlib_inline registers its own post_execute callback (which
        # displays and closes the figures: it registers when pyplot is first imported, after
        # this file ran), so this sees the cell's figures first.  With a non-GUI backend
        # (MPLBACKEND=Agg, as `make test` runs) figures stay open: `checked` skips those
        # already checked and unchanged.
        if "matplotlib.pyplot" not in sys.modules:
            return
        from matplotlib._pylab_helpers import Gcf  # pyplot's figures (plt.figure(n) would
        for manager in Gcf.get_all_fig_managers():  # change the current one)
            check(manager.canvas.figure)
        # Then close them, as the inline backend a learner's JupyterLab uses does after every
        # cell: left open, a test run's kernel holds every figure of the notebook, and its
        # peak memory would overstate a learner's.
        pyplot = sys.modules["matplotlib.pyplot"]
        if "inline" not in pyplot.get_backend():
            pyplot.close("all")

    def check_displayed_figure(fig):
        # The inline backend's plt.show() displays and closes figures inside the cell, before
        # post_execute: a mime-bundle printer for Figure sees each one as it is displayed.
        # Returning None leaves the figure's display as it was (PNG and text, by the other
        # formatters).  Not the text/plain formatter: enabling the inline backend removes
        # every per-mimetype printer for Figure.
        check(fig)

    shell.events.register("pre_run_cell", remember_cell)
    shell.events.register("post_execute", check_open_figures)
    # By name: no matplotlib import here; the printer applies once matplotlib is loaded.
    shell.display_formatter.mimebundle_formatter.for_type_by_name(
        "matplotlib.figure", "Figure", check_displayed_figure)


def _install_resource_log(log_and_shell=_log_and_shell):
    """After each cell, log the kernel's peak memory so far (tests/support/notebook_checks.py checks it
    against the classroom limits and reports it per notebook)."""
    import json
    import os
    import resource
    import sys
    import threading
    import time

    log_path, shell = log_and_shell("IPU_RESOURCE_LOG")
    if shell is None:
        return

    # The peak of the kernel's private (anonymous) memory: what each more learner's kernel
    # costs a server, since the shared libraries' pages (a third of TensorFlow's footprint)
    # are loaded once for all kernels.  The OS keeps no peak of it, so a thread samples it.
    private = {"peak_bytes": 0}

    def private_bytes():
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
        return 0

    def sample_private():
        while True:
            private["peak_bytes"] = max(private["peak_bytes"], private_bytes())
            time.sleep(0.02)

    if os.path.exists("/proc/self/status"):
        threading.Thread(target=sample_private, name="private-memory-sampler",
                         daemon=True).start()

    def peak_rss_bytes():
        # VmHWM: this process's own peak since it started.  Not getrusage's ru_maxrss, which
        # survives exec: a kernel started by a big pytest process would report its parent's.
        if os.path.exists("/proc/self/status"):
            with open("/proc/self/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB, elsewhere

    def onednn_enabled():
        if "tensorflow" not in sys.modules:
            return None
        try:
            from tensorflow.python.util import _pywrap_util_port
            return bool(_pywrap_util_port.IsMklEnabled())
        except Exception:  # another TensorFlow's layout: the setting alone tells
            return None

    def log_peak():
        if os.path.exists("/proc/self/status"):
            private["peak_bytes"] = max(private["peak_bytes"], private_bytes())
        record = {"pid": os.getpid(), "peak_bytes": peak_rss_bytes(),
                  "private_peak_bytes": private["peak_bytes"],
                  "tensorflow": "tensorflow" in sys.modules,
                  # which CPU kernels TensorFlow takes here (tests/support/kernel_paths.py):
                  # the setting, and TensorFlow's own answer (what it made of the setting, and
                  # of the CPU's features where there is none, as it loaded)
                  "onednn_setting": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
                  "onednn_enabled": onednn_enabled(),
                  # its intra-op pool: None is TensorFlow's own size, as in a learner's kernel
                  "intraop_threads_setting": os.environ.get("TF_NUM_INTRAOP_THREADS")}
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")

    shell.events.register("post_execute", log_peak)


for _install in (_install_legibility_hook, _install_resource_log):
    try:
        _install()
    except Exception:  # never break a kernel's start-up
        pass
del _install, _install_legibility_hook, _install_resource_log, _log_and_shell
