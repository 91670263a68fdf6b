"""Past one server (docs/hosting.md): the single-user image (hub/image/) and the Zero to
JupyterHub values (hub/z2jh/values.yaml) stay true to the lab they serve.

What can be checked without a Docker engine, a cluster or helm:

- the image installs pyproject.toml's packages with pyproject's ranges, and the JupyterHub range
  of hub/requirements-hub.txt; Binder's environment.yml keeps pyproject's ranges too;
- those requirements resolve offline in the environment these tests run in (`pip install
  --dry-run --no-index`): every package and, transitively, every dependency is installed here at
  a version inside its range, so the ranges admit one consistent set, the one the tests pass on.
  It does not prove that PyPI still serves those versions, nor that `docker build` succeeds;
- the Dockerfile copies files that exist, runs as jovyan (uid 1000) with the course outside the
  home, and serves with the lab's Jupyter server settings (jupyter/jupyter_server_config.py:
  kernel culling, `%tensorboard` through the server's proxy);
- the image's entry point copies only the course files a learner lacks and trusts them;
- the values' memory, CPU, start time and culling agree with the figures docs/classroom.md
  states (parsed here, not copied), by the rule docs/hosting.md gives.

Checking the values against the chart's schema needs the chart, which no registry reachable
here serves: docs/hosting.md says how it was checked at development time.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from traitlets.config import Config

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on; 3.10 has no TOML reader of its own

ROOT = Path(__file__).resolve().parents[2]
IMAGE = ROOT / "hub" / "image"
VALUES = yaml.safe_load((ROOT / "hub" / "z2jh" / "values.yaml").read_text())
CLASSROOM = (ROOT / "docs" / "classroom.md").read_text(encoding="utf-8")
# The Littlest JupyterHub's resource-estimation guide: the most memory a learner used in a
# session, plus 20-40 % headroom.
HEADROOM = (0.20, 0.40)
# The image's own dependency on JupyterHub, apart from the lab's packages.
HUB_PACKAGE = "jupyterhub"


def requirements(lines):
    """{canonical name: specifier} of requirement lines, comments and blanks left out."""
    found = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            found[canonicalize_name(requirement.name)] = requirement.specifier
    return found


def requirements_file(path):
    return requirements(path.read_text().splitlines())


def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def image_requirements():
    return requirements_file(IMAGE / "requirements.txt")


def dockerfile():
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    text = (IMAGE / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return [line.strip() for line in "\n".join(lines).replace("\\\n", " ").splitlines()
            if line.strip()]


def instructions(keyword):
    return [line.split(None, 1)[1] for line in dockerfile() if line.split()[0] == keyword]


# --- the packages ---------------------------------------------------------------------------

def test_the_image_installs_the_labs_packages_with_pyprojects_ranges():
    project = pyproject()
    lab = requirements(project["dependencies"] + project["optional-dependencies"]["lab"])
    image = image_requirements()
    image.pop(HUB_PACKAGE)
    assert image == lab


def test_the_images_jupyterhub_range_is_the_hubs():
    hub = requirements_file(ROOT / "hub" / "requirements-hub.txt")
    assert image_requirements()[HUB_PACKAGE] == hub[HUB_PACKAGE]


def test_binders_environment_keeps_pyprojects_ranges():
    """environment.yml (Binder, conda) lists the same ranges as pyproject.toml, and every package
    the lab needs; of the test extra it carries only a few, which must match too."""
    project = pyproject()
    declared = requirements(project["dependencies"] + [
        line for extra in project["optional-dependencies"].values() for line in extra])
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_lists = [item["pip"] for item in environment["dependencies"] if isinstance(item, dict)]
    listed = requirements(pip_lists[0])
    assert {name: declared.get(name) for name in listed} == listed
    lab = requirements(project["dependencies"] + project["optional-dependencies"]["lab"])
    assert lab.keys() <= listed.keys()


def python_of_environment_yml():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pins = [item for item in environment["dependencies"]
            if isinstance(item, str) and item.startswith("python=")]
    return pins[0].split("=", 1)[1]


def test_the_image_runs_binders_python_within_pyprojects_range():
    [base_argument] = [argument for argument in instructions("ARG")
                       if argument.startswith("BASE=")]
    assert instructions("FROM") == ["${BASE}"]
    base = base_argument.split("=", 1)[1]
    match = re.fullmatch(r"python:(\d+\.\d+)-slim-\w+", base)
    assert match, base
    assert match[1] == python_of_environment_yml()
    assert Version(match[1]) in SpecifierSet(pyproject()["requires-python"])


def pip_dry_run(python, requirement_lines, tmp_path):
    listing = tmp_path / "requirements.txt"
    listing.write_text("\n".join(requirement_lines) + "\n")
    command = [sys.executable, "-m", "pip"]
    if python != sys.executable:
        command += ["--python", python]
    command += ["install", "--dry-run", "--no-index", "--quiet", "--disable-pip-version-check",
                "-r", str(listing)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_images_lab_packages_resolve_offline_here(tmp_path):
    """Every lab package of the image, and every dependency of theirs, is installed in this test
    environment at a version within its range: pip finds nothing left to fetch (no index)."""
    lines = [f"{name}{spec}" for name, spec in image_requirements().items()
             if name != HUB_PACKAGE]
    result = pip_dry_run(sys.executable, lines, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.hub
def test_the_images_whole_list_resolves_offline_with_make_hubs_jupyterhub(tmp_path):
    """The same with JupyterHub: `make hub` puts it in build/hub-singleuser-venv, an overlay on
    the lab's .venv that is exactly the environment `make hub` runs learners' servers in
    (`make test` makes it first, with `make hub-tools`; -m "not hub" leaves this out)."""
    overlay = ROOT / "build" / "hub-singleuser-venv" / "bin" / "python"
    assert overlay.exists(), "build/hub-singleuser-venv is missing: run `make hub-tools`"
    lines = [f"{name}{spec}" for name, spec in image_requirements().items()]
    result = pip_dry_run(str(overlay), lines, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.hub
def test_the_overlay_holds_only_what_the_labs_venv_lacks():
    """hub/overlay_requirements.py's list (installed without resolving) names jupyterhub and
    each dependency .venv lacks, nothing .venv has: the overlay holds exactly those."""
    from importlib import metadata

    hub_python = ROOT / "build" / "hub-venv" / "bin" / "python"
    lab_site = sysconfig.get_paths()["purelib"]
    listed = subprocess.run([str(hub_python), str(ROOT / "hub" / "overlay_requirements.py"),
                             lab_site], capture_output=True, text=True, check=True).stdout.split()
    names = {line.split("==")[0] for line in listed}
    assert "jupyterhub" in names and "sqlalchemy" in names

    def installed_in(site):
        return {canonicalize_name(d.metadata["Name"])
                for d in metadata.distributions(path=[str(site)])}

    assert not names & installed_in(lab_site)
    overlay = ROOT / "build" / "hub-singleuser-venv" / "lib"
    assert installed_in(next(overlay.glob("python*/site-packages"))) == names


# --- the Dockerfile ---------------------------------------------------------------------------

def test_every_file_the_dockerfile_copies_exists():
    for copy in instructions("COPY"):
        words = [word for word in shlex.split(copy) if not word.startswith("--")]
        for source in words[:-1]:
            assert (ROOT / source).exists(), f"COPY {source}: no such path in the repository"


def test_the_dockerfile_installs_the_requirements_then_the_emulator_without_its_dependencies():
    runs = " ".join(instructions("RUN"))
    assert "pip install -r /tmp/requirements.txt -c /tmp/image-lock.txt" in runs
    assert "pip install --no-deps /tmp/src" in runs
    copies = instructions("COPY")
    assert "hub/image/requirements.txt /tmp/requirements.txt" in copies
    assert "locks/image.txt /tmp/image-lock.txt" in copies
    # What `pip install .` needs: the project file, its readme, both packages' folders.
    for source in ("pyproject.toml", "README.md", "ipu_emulator", "widgets"):
        assert any(copy.startswith(source) or f" {source} " in f" {copy} " for copy in copies)


def test_the_image_runs_as_jovyan_with_the_course_outside_the_home():
    runs = " ".join(instructions("RUN"))
    assert re.search(r"useradd .*--home-dir /home/jovyan .*--uid 1000 .*jovyan", runs)
    assert instructions("USER") == ["1000"]
    copies = instructions("COPY")
    assert "notebooks /srv/course/notebooks" in copies
    assert "docs /srv/course/docs" in copies
    assert "IPU_EMULATOR_DATA=sample" in instructions("ENV")
    assert "IPU_LAB_PROGRESS_FILE=/home/jovyan/.ipu-lab/progress.jsonl" in instructions("ENV")
    assert json.loads(instructions("CMD")[0]) == ["jupyterhub-singleuser"]
    assert json.loads(instructions("ENTRYPOINT")[0])[-1] == "ipu-lab-start"
    start = (IMAGE / "start.py").read_text()
    assert 'os.environ.get("IPU_LAB_COURSE", "/srv/course")' in start


def lab_server_settings(environment):
    """(the settings, a traitlets Config, TENSORBOARD_PROXY_URL) that the lab's Jupyter server
    config (jupyter/jupyter_server_config.py) makes in a server with ``environment``."""
    config = Config()
    code = (ROOT / "jupyter" / "jupyter_server_config.py").read_text()
    with pytest.MonkeyPatch.context() as patch:
        for name in ("JUPYTERHUB_SERVICE_PREFIX", "TENSORBOARD_PROXY_URL"):
            # setenv first records the variable as it was (even unset), so that leaving the
            # context restores it: the config sets TENSORBOARD_PROXY_URL itself, and a value
            # left behind would reach `make lab` in a later test of this process.
            patch.setenv(name, "")
            patch.delenv(name)
        for name, value in environment.items():
            patch.setenv(name, value)
        exec(compile(code, "jupyter_server_config.py", "exec"), {"get_config": lambda: config})
        return config, os.environ["TENSORBOARD_PROXY_URL"]


def test_the_image_serves_with_the_labs_server_settings():
    copy = "jupyter/jupyter_server_config.py /etc/jupyter/jupyter_server_config.py"
    assert copy in instructions("COPY")
    # The culling docs/hosting.md states; the frame's path on a hub (the chart's servers are
    # at /user/<name>/, as make hub's) and where no hub is (make lab, TLJH's own prefix too).
    row = re.search(r"^\| idle kernel of a closed notebook shut down after \| (\d+) s, "
                    r"checked every (\d+) s \|", (ROOT / "docs" / "hosting.md").read_text(), re.M)
    settings, on_hub = lab_server_settings({"JUPYTERHUB_SERVICE_PREFIX": "/user/ada/"})
    assert dict(settings.MappingKernelManager) == {"cull_idle_timeout": int(row[1]),
                                                   "cull_interval": int(row[2])}
    # No search for language servers at each start (the lab installs none).
    assert settings.LanguageServerManager.autodetect is False
    assert on_hub == "/user/ada/proxy/%PORT%/"
    assert lab_server_settings({})[1] == "/proxy/%PORT%/"


# --- the entry point --------------------------------------------------------------------------

NOTEBOOK = {"cells": [{"cell_type": "markdown", "id": "a-lesson", "metadata": {},
                       "source": "# A lesson"}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def start(course, home, server="print('server up')", python=sys.executable, as_user=()):
    """The entry point on ``course`` and ``home``, starting ``python -c server`` for the
    server, run by ``python`` (``as_user``: a command prefix that drops to another user)."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("JUPYTER_", "XDG_"))}
    env.update(HOME=str(home), IPU_LAB_COURSE=str(course))
    return subprocess.run(
        [*as_user, python, str(IMAGE / "start.py"), python, "-c", server],
        env=env, capture_output=True, text=True, timeout=120)


def trusted(notebook, home):
    import nbformat
    from nbformat.sign import NotebookNotary

    notary = NotebookNotary(data_dir=str(home / ".local" / "share" / "jupyter"))
    return notary.check_signature(nbformat.read(str(notebook), as_version=4))


def test_the_entry_point_copies_only_what_the_learner_lacks_then_starts_the_server(tmp_path):
    course, home = tmp_path / "course", tmp_path / "home"
    write(course / "notebooks" / "01_lesson.ipynb", json.dumps(NOTEBOOK))
    write(course / "notebooks" / "README.md", "the course's path")
    write(course / "notebooks" / "traces" / "run.json", "{}")
    write(course / "notebooks" / ".ipynb_checkpoints" / "01_lesson-checkpoint.ipynb", "{}")
    write(course / "docs" / "glossary.md", "first edition")

    first = start(course, home)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "server up\n"
    assert (home / "notebooks" / "README.md").read_text() == "the course's path"
    assert not (home / "notebooks" / "traces").exists()
    assert not (home / "notebooks" / ".ipynb_checkpoints").exists()
    assert (home / "docs" / "glossary.md").read_text() == "first edition"
    assert trusted(home / "notebooks" / "01_lesson.ipynb", home)

    write(home / "notebooks" / "README.md", "the learner's own notes")
    write(course / "notebooks" / "README.md", "the course's path, updated")
    write(course / "notebooks" / "02_next.ipynb", json.dumps(NOTEBOOK))
    write(course / "docs" / "glossary.md", "second edition")
    second = start(course, home)
    assert second.returncode == 0, second.stderr
    assert (home / "notebooks" / "README.md").read_text() == "the learner's own notes"
    assert (home / "notebooks" / "02_next.ipynb").exists()
    assert (home / "docs" / "glossary.md").read_text() == "second edition"
    assert "1 new course file(s)" in second.stderr


def test_the_entry_point_gives_the_course_to_a_learner_who_is_not_root(tmp_path):
    """As the image runs it: as its user (here nobody, when the tests run as root; otherwise
    whoever runs them), the entry point copies the course into a home that user owns and
    starts the server as that user.  The system's Python runs it, as the learner could not
    enter this Python's folder (pyenv's, under /root)."""
    learner = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] \
        if os.geteuid() == 0 else []
    python = "/usr/bin/python3" if learner else sys.executable
    shared = Path(tempfile.mkdtemp(prefix="ipu-lab-image-"))   # not under /root: the learner
    try:                                                       # must reach it
        shared.chmod(0o755)
        course, home = shared / "course", shared / "home"
        write(course / "notebooks" / "01_lesson.ipynb", json.dumps(NOTEBOOK))
        write(course / "docs" / "glossary.md", "first edition")
        home.mkdir()
        if learner:
            os.chown(home, 65534, 65534)
        ran = start(course, home, "import os; print(os.getuid(), os.getgid())", python,
                    as_user=learner)
        assert ran.returncode == 0, ran.stderr
        uid, gid = map(int, ran.stdout.split())
        assert uid != 0 and gid != 0 and (uid == 65534 or not learner)
        copied = home / "notebooks" / "01_lesson.ipynb"
        assert copied.read_text() == json.dumps(NOTEBOOK)
        assert copied.stat().st_uid == uid and (home / "docs").stat().st_uid == uid
    finally:
        shutil.rmtree(shared, ignore_errors=True)


# --- the Zero to JupyterHub values ---------------------------------------------------------------

def jupyter_bytes(size):
    """Bytes of a Jupyter size (JupyterHub's ByteSpecification: K, M, G, T are powers of 1024)."""
    if isinstance(size, (int, float)):
        return int(size)
    powers = {"K": 1, "M": 2, "G": 3, "T": 4}
    return int(float(size[:-1]) * 1024 ** powers[size[-1]])


def figure(pattern, group=1):
    match = re.search(pattern, CLASSROOM)
    assert match, f"docs/classroom.md no longer says {pattern!r}"
    return float(match[group])


def gigabytes(size):
    return jupyter_bytes(size) / 1e9


def test_the_memory_limit_is_a_learners_peak_with_headroom():
    peak = figure(r"peaked at [\d.]+-([\d.]+) GB resident")         # server + one kernel
    server = figure(r"each learner's server holds about ([\d.]+) GB")
    kernel = figure(r"kernel up to ([\d.]+) GB")
    limit = gigabytes(VALUES["singleuser"]["memory"]["limit"])
    low, high = HEADROOM
    assert peak * (1 + low) <= limit <= peak * (1 + high)
    assert limit >= server + kernel, "the largest kernel must fit beside its server"


def test_the_memory_guarantee_is_a_learners_share_of_a_machine_with_headroom():
    share = figure(r"[\d.]+-([\d.]+) GB of the machine's memory per learner")
    per_gb = figure(r"about (\d+) learners per GB")
    guarantee = gigabytes(VALUES["singleuser"]["memory"]["guarantee"])
    low, high = HEADROOM
    assert share * (1 + low) <= guarantee <= share * (1 + high)
    assert round(1 / guarantee) == per_gb
    assert guarantee < gigabytes(VALUES["singleuser"]["memory"]["limit"])


def test_the_cpu_guarantee_is_the_comfortable_share_and_the_limit_the_rehearsals_machine():
    comfortable = figure(r"CPU, comfortable \| (\d+) learners per core")
    ceiling = figure(r"CPU, ceiling seen \| (\d+) learners per core")
    cores = figure(r"on this machine \((\d+) cores")
    cpu = VALUES["singleuser"]["cpu"]
    assert cpu["guarantee"] == pytest.approx(1 / comfortable)
    assert 1 / cpu["guarantee"] <= ceiling
    assert cpu["limit"] == cores


def test_a_server_has_longer_to_start_than_the_slowest_start_seen():
    starts = re.findall(r"^\| \d+ \| [a-z ]+ \| [\d.]+-([\d.]+) \|", CLASSROOM, re.M)
    assert starts, "docs/classroom.md's rehearsal table has no server start column"
    assert VALUES["singleuser"]["startTimeout"] > max(float(s) for s in starts)


def test_idle_servers_are_culled_as_make_hub_does():
    hub_readme = (ROOT / "hub" / "README.md").read_text(encoding="utf-8")
    timeout = int(re.search(r"`HUB_CULL_SERVERS`\s+seconds\s+\(default\s+(\d+)\)", hub_readme)[1])
    cull = VALUES["cull"]
    assert cull == {"enabled": True, "timeout": timeout, "every": timeout // 6}


def test_the_image_is_pulled_before_anyone_logs_in():
    assert VALUES["prePuller"] == {"hook": {"enabled": True}, "continuous": {"enabled": True}}


def test_learners_land_on_a_page_of_the_course():
    url = VALUES["singleuser"]["defaultUrl"]
    assert url.startswith("/lab/tree/")
    assert (ROOT / url.removeprefix("/lab/tree/")).is_file()


def test_the_login_is_make_hubs_roster_with_no_code_in_the_repository():
    config = VALUES["hub"]["config"]
    assert config["JupyterHub"]["authenticator_class"] == \
        "firstuseauthenticator.FirstUseAuthenticator"
    assert config["FirstUseAuthenticator"]["create_users"] is False
    assert "allow_all" not in config["Authenticator"]
    assert "custom" not in VALUES   # the roster and its codes: roster.yaml, the instructor's
    seeding = VALUES["hub"]["extraConfig"]["roster"]
    assert 'get_config("custom.roster"' in seeding and "bcrypt.hashpw" in seeding
    compile(seeding, "extraConfig.roster", "exec")


def test_the_roster_file_for_zero_to_jupyterhub_holds_a_code_per_learner():
    made = subprocess.run([sys.executable, str(ROOT / "hub" / "roster.py"), "--learners", "3"],
                          capture_output=True, text=True, check=True).stdout
    roster = yaml.safe_load(made)["custom"]["roster"]
    assert sorted(roster) == ["instructor", "learner01", "learner02", "learner03"]
    assert len(set(roster.values())) == 4 and len(roster["instructor"]) >= 32


def test_every_relative_link_of_the_hosting_page_resolves():
    page = ROOT / "docs" / "hosting.md"
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8"))
    local = [link for link in links if "://" not in link]
    assert local
    for link in local:
        assert (page.parent / link).exists(), link
