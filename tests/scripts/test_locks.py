"""The locks (locks/*.txt, written by `make lock`): every package the lab, the hub and the image
install, pinned, and the pins what `make env`, `make hub-tools` and the image install.

- each lock pins every requirement of its source (pyproject.toml's dependencies with the `lab`
  and `test` extras; hub/requirements-hub.txt; hub/image/requirements.txt) at a version inside
  the source's range, for every Python from 3.11 and platform it names;
- the three agree on every package they share, so the hub's overlay and the image hold the
  lab's versions;
- the lab's environment the tests run in holds exactly lab.txt's versions (the locked set is
  the tested set), and `make env` installs with it by default."""
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.child_python import ROOT

LOCKS = Path(ROOT) / "locks"


def pins(lock):
    """[(name, version, marker or None)] of a lock file."""
    found = []
    for line in (LOCKS / lock).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            [specifier] = requirement.specifier
            assert specifier.operator == "==", line
            found.append((canonicalize_name(requirement.name), Version(specifier.version),
                          requirement.marker))
    return found


def requirement_lines(path):
    return [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()
            if line.split("#", 1)[0].strip()]


def pyproject_requirements():
    project = tomllib.loads((Path(ROOT) / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return project["dependencies"] + extras["lab"] + extras["test"]


SOURCES = {
    "lab.txt": pyproject_requirements,
    "hub.txt": lambda: requirement_lines(Path(ROOT) / "hub" / "requirements-hub.txt"),
    "image.txt": lambda: requirement_lines(Path(ROOT) / "hub" / "image" / "requirements.txt"),
}


@pytest.mark.parametrize("lock", SOURCES)
def test_each_lock_pins_its_sources_requirements_inside_their_ranges(lock):
    pinned = pins(lock)
    for line in SOURCES[lock]():
        requirement = Requirement(line)
        versions = [version for name, version, _ in pinned
                    if name == canonicalize_name(requirement.name)]
        assert versions, f"{lock} does not pin {requirement.name}"
        for version in versions:
            assert version in requirement.specifier, (lock, requirement, version)


def test_the_locks_agree_on_every_package_they_share():
    by_lock = {lock: {(name, str(marker)): version for name, version, marker in pins(lock)}
               for lock in SOURCES}
    lab = by_lock["lab.txt"]
    for lock in ("hub.txt", "image.txt"):
        for key, version in by_lock[lock].items():
            if key in lab:
                assert lab[key] == version, (lock, key, version, lab[key])
    for key, version in by_lock["hub.txt"].items():
        if key in by_lock["image.txt"]:
            assert by_lock["image.txt"][key] == version, key


def test_the_tested_environment_is_the_locked_set():
    differ = []
    for name, version, marker in pins("lab.txt"):
        if marker is not None and not marker.evaluate():
            continue
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            differ.append((name, str(installed), str(version)))
    assert differ == [], f"installed, locked: {differ} (make env installs from locks/lab.txt)"


def planned(*arguments):
    """The commands make would run (``make -n -B``: none is run)."""
    return subprocess.run(["make", "-n", "-B", *arguments], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True).stdout


def test_make_env_and_the_hub_install_with_the_locks_by_default():
    assert "-c locks/lab.txt" in planned("env")
    assert "locks/" not in planned("env", "LOCKED=0")   # the ranges alone, on request
    hub = planned("hub-tools")
    assert hub.count("-c locks/hub.txt") == 1   # the hub's venv ...
    # ... and the servers' overlay takes the hub's venv's versions, as installed, unresolved
    assert "--no-deps $(build/hub-venv/bin/python hub/overlay_requirements.py" in hub


def test_the_hosts_workflow_runs_the_locked_set_on_pythons_the_lab_takes():
    """.github/workflows/hosts.yml (run by GitHub only): each host installs with the lab's
    lock, on Pythons inside pyproject.toml's range, and runs every notebook."""
    import yaml
    from packaging.specifiers import SpecifierSet

    workflow = yaml.safe_load((Path(ROOT) / ".github" / "workflows" / "hosts.yml").read_text())
    job = workflow["jobs"]["notebooks"]
    commands = " ".join(step.get("run", "") for step in job["steps"])
    assert "-c locks/lab.txt" in commands and "--nbval-lax notebooks" in commands
    supported = SpecifierSet(tomllib.loads((Path(ROOT) / "pyproject.toml").read_text())
                             ["project"]["requires-python"])
    pythons = job["strategy"]["matrix"]["python"]
    assert pythons and all(Version(python) in supported for python in pythons)
    assert len(job["strategy"]["matrix"]["os"]) == 4
