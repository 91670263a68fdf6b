"""The site's Chromium is timed as the app in front (``lite_driver.as_foreground_app``): as
root, every process below the test's whose name says Chromium gets the foreground priority,
and nothing else does; as anyone else, nothing changes.  A copy of ``sleep`` named
``chromium`` stands for the browser (under 0.1 s)."""
import os
import shutil
import subprocess

from tests.support import lite_driver


def test_only_chromium_below_this_process_is_put_in_front(tmp_path):
    browser = tmp_path / "chromium"
    shutil.copy(shutil.which("sleep"), browser)
    processes = [subprocess.Popen([str(browser), "30"]),
                 subprocess.Popen([shutil.which("sleep"), "30"])]
    try:
        found = dict(lite_driver._descendants(os.getpid()))  # pylint: disable=protected-access
        assert found[processes[0].pid] == "chromium" and found[processes[1].pid] == "sleep"
        put_in_front = lite_driver.as_foreground_app()
        assert put_in_front == (os.geteuid() == 0)
        nice = [os.getpriority(os.PRIO_PROCESS, p.pid) for p in processes]
        own = os.getpriority(os.PRIO_PROCESS, 0)
        assert nice == ([lite_driver.FOREGROUND_NICE, own] if put_in_front else [own, own])
    finally:
        for process in processes:
            process.kill()
            process.wait()
