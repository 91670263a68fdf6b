"""Which browser the browser tests drive (tests/support/lab_driver.py) and what
scripts/ensure_browser.sh says when it is pointed at no browser."""
import os
import subprocess

from tests.support import lab_driver
from tests.support.child_python import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "ensure_browser.sh")


def executable(path):
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_the_tests_drive_the_headless_shell_where_it_is_installed(tmp_path, monkeypatch):
    monkeypatch.delenv("IPU_LAB_CHROMIUM", raising=False)
    monkeypatch.setattr(lab_driver, "HEADLESS_SHELL", executable(tmp_path / "shell"))
    assert lab_driver.chromium_executable() == lab_driver.HEADLESS_SHELL
    # Not installed: the full browser.
    monkeypatch.setattr(lab_driver, "HEADLESS_SHELL", str(tmp_path / "absent"))
    assert lab_driver.chromium_executable() == lab_driver.FULL_CHROMIUM
    # A binary the learner names wins over both.
    monkeypatch.setenv("IPU_LAB_CHROMIUM", "/opt/chrome/chrome")
    assert lab_driver.chromium_executable() == "/opt/chrome/chrome"


def test_ensure_browser_accepts_a_named_browser_and_refuses_a_file_that_is_none(tmp_path):
    named = executable(tmp_path / "chrome")
    done = subprocess.run(["bash", SCRIPT], env=dict(os.environ, IPU_LAB_CHROMIUM=named),
                          capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
    not_one = tmp_path / "notes.txt"
    not_one.write_text("chromium")
    done = subprocess.run(["bash", SCRIPT], env=dict(os.environ, IPU_LAB_CHROMIUM=str(not_one)),
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert f"IPU_LAB_CHROMIUM={not_one} is not an executable file" in done.stderr
