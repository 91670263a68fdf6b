"""What build/hub-singleuser-venv must add to the lab's .venv for `jupyterhub-singleuser`.

Run by the hub's own Python (build/hub-venv, where jupyterhub and its dependencies are
installed from locks/hub.txt) with the lab's site-packages as its argument, it prints one
``name==version`` line for each package of jupyterhub's dependency closure, as installed in
the hub's venv, that the lab's .venv lacks.  hub/hub.mk installs exactly those into the overlay
with ``uv pip install --no-deps``: the overlay sees .venv's packages through a .pth file, which
uv does not read, so uv left to resolve would install jupyter-server, tornado and the rest a
second time; pip, which does read it, took 23 s to resolve and install what uv does in about
one.  Both venvs follow the same locks (locks/hub.txt is compiled against locks/lab.txt), so a
package present in .venv is present at the version jupyterhub's closure pins.
"""
from __future__ import annotations

import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def closure(root: str) -> dict[str, str]:
    """{normalized name: version} of ``root`` and everything it requires here, markers
    evaluated for this interpreter (no extras)."""
    found: dict[str, str] = {}
    pending = [root]
    while pending:
        name = canonicalize_name(pending.pop())
        if name in found:
            continue
        distribution = metadata.distribution(name)
        found[name] = distribution.version
        for line in distribution.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return found


def installed(site_packages: str) -> set[str]:
    return {canonicalize_name(d.metadata["Name"])
            for d in metadata.distributions(path=[site_packages])}


def main(argv: list[str]) -> None:
    lab_site_packages, = argv
    present = installed(lab_site_packages)
    for name, version in sorted(closure("jupyterhub").items()):
        if name not in present:
            print(f"{name}=={version}")


if __name__ == "__main__":
    main(sys.argv[1:])
