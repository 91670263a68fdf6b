"""The single-user image as `make image` builds it (hub/image/image.mk), run as a learner's
server is: its entry point (hub/image/start.py), as the image's user jovyan (uid 1000, group
users), gives the course to the home and starts a Jupyter server that serves the lab, with the
lab's server settings, JupyterLab defaults and extension, and a kernel that imports the emulator.

`make test-image` builds the image and runs these with IPU_LAB_IMAGE naming it.  `podman run`
needs cgroups this machine does not give a container, so the container is buildah's, run with
chroot isolation on the host's network, as the image's steps were built."""
import json
import os
import subprocess
import time
import urllib.request
import uuid

import pytest

from tests.support.child_python import ROOT
from tests.support.lab_driver import free_port

IMAGE = os.environ["IPU_LAB_IMAGE"]
TOKEN = uuid.uuid4().hex


def buildah(*arguments, **options):
    return subprocess.run(["buildah", *arguments], check=True, capture_output=True, text=True,
                          **options)


@pytest.fixture(scope="module")
def container():
    name = buildah("from", "--quiet", IMAGE).stdout.strip()
    try:
        yield name
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True, check=False)


def image_config(field):
    """A field of the image's OCI configuration ("User", "Entrypoint"...)."""
    return json.loads(buildah("inspect", "--type", "image", IMAGE).stdout)["OCIv1"]["config"][field]


def run_in(container, *command):
    """``command`` in the container as the image's user (its USER), through the image's
    entry point (its ENTRYPOINT), as a spawner runs the image with ``command`` for CMD."""
    return ["buildah", "run", "--isolation", "chroot", container, "--",
            *image_config("Entrypoint"), *command]


def test_the_image_runs_as_the_learner_not_root():
    assert image_config("User") == "1000"


def test_the_entry_point_gives_the_course_as_the_learner(container):
    shown = subprocess.run(run_in(container, "python", "-c", (
        "import os, json; home = os.environ['HOME']; print(json.dumps({'uid': os.getuid(), "
        "'gid': os.getgid(), 'home': home, 'notebooks': sorted(os.listdir(home + "
        "'/notebooks')), 'owner': os.stat(home + '/notebooks').st_uid}))")),
        capture_output=True, text=True, timeout=120, check=True)
    facts = json.loads(shown.stdout.strip().splitlines()[-1])
    assert (facts["uid"], facts["gid"], facts["home"], facts["owner"]) == \
        (1000, 100, "/home/jovyan", 1000), facts
    course = {path.name for path in (ROOT / "notebooks").glob("*.ipynb")}
    assert course and course <= set(facts["notebooks"]), facts


def test_the_emulator_imports_and_trains_in_the_image(container):
    ran = subprocess.run(run_in(container, "python", "-c", (
        "import numpy as np, tensorflow.compat.v1 as tf\n"
        "from ipu_emulator import ipu\n"
        "config = ipu.config.IPUConfig()\nconfig.auto_select_ipus = 1\n"
        "config.configure_ipu_system()\n"
        "print('emulator', ipu.__name__)")), capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and "emulator" in ran.stdout, ran.stderr[-2000:]


def fetch(port, path):
    url = f"http://127.0.0.1:{port}{path}{'&' if '?' in path else '?'}token={TOKEN}"
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def test_the_learners_server_serves_the_lab_and_starts_a_kernel(container):
    port = free_port()
    server = subprocess.Popen(run_in(
        container, "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
        f"--IdentityProvider.token={TOKEN}"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                fetch(port, "/api/status")
                break
            except OSError:
                assert server.poll() is None, server.stdout.read()
                assert time.monotonic() < deadline, "the server did not answer in 120 s"
                time.sleep(1)
        page = fetch(port, "/lab")
        assert "ipu-lab-cell-edits" in page   # the lab's extension, in the page's config
        settings = json.loads(fetch(port, "/lab/api/settings/"
                                          "@jupyterlab/docmanager-extension:plugin"))
        # the lab's JupyterLab defaults (overrides.json) are the schema's defaults
        assert settings["schema"]["properties"]["autosaveInterval"]["default"] == 15
        kernel = json.loads(urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{port}/api/kernels?token={TOKEN}", method="POST",
            data=b"{}", headers={"Content-Type": "application/json"}), timeout=60).read())
        assert kernel["name"] == "python3"
    finally:
        # buildah's chroot isolation passes no signal on to the server it runs: stop it by its
        # token, which no other process's command line holds.
        subprocess.run(["pkill", "-TERM", "-f", TOKEN], check=False)
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        deadline = time.monotonic() + 30
        while subprocess.run(["pgrep", "-f", TOKEN], capture_output=True).returncode == 0:
            assert time.monotonic() < deadline, "the image's server outlived its test"
            time.sleep(0.5)
