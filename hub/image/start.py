#!/usr/bin/env python3
"""Give the learner the course, then start their server: the image's entry point.

Zero to JupyterHub mounts each learner's persistent volume on /home/jovyan, which hides
whatever the image put there, so the course is baked into /srv/course and copied into the home
at every start, as hub/jupyterhub_config.py's copy_course does for `make hub`:

- a course file is copied only when the learner has no file of that name: their edits are never
  overwritten, and notebooks added to the course later still reach them;
- docs/ (reference text the notebooks link to as ../docs/) is refreshed at every start;
- newly copied notebooks are trusted, so JupyterLab shows their stored traces at once.

A failed copy is reported and the server starts anyway: the learner can still reach it.

    ipu-lab-start jupyterhub-singleuser [args...]      (the image's ENTRYPOINT and CMD)

IPU_LAB_COURSE moves the course (default /srv/course); the home is $HOME.
"""
import os
import shutil
import subprocess
import sys

COURSE = os.environ.get("IPU_LAB_COURSE", "/srv/course")
# Generated while notebooks run; never part of the course (hub/jupyterhub_config.py's
# copy_course uses copy_missing below too).
SKIP = {"traces", ".ipynb_checkpoints", "__pycache__"}


def course_files(src):
    """Relative paths of the files under src, leaving out generated folders."""
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in SKIP)
        for name in sorted(files):
            yield os.path.relpath(os.path.join(root, name), src)


def copy_missing(src, dst):
    """Copy each file of src that dst lacks; return the paths copied."""
    copied = []
    for rel in course_files(src):
        target = os.path.join(dst, rel)
        if not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(os.path.join(src, rel), target)
            copied.append(target)
    return copied


def give_course(course, home):
    """The learner's notebooks/ (missing files only) and docs/ (refreshed)."""
    copied = copy_missing(os.path.join(course, "notebooks"), os.path.join(home, "notebooks"))
    shutil.copytree(os.path.join(course, "docs"), os.path.join(home, "docs"), dirs_exist_ok=True)
    notebooks = [path for path in copied if path.endswith(".ipynb")]
    if notebooks:
        subprocess.run([sys.executable, "-m", "jupyter", "trust", *notebooks],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return copied


def main(argv):
    home = os.path.expanduser("~")
    try:
        copied = give_course(COURSE, home)
        print(f"ipu-lab-start: {len(copied)} new course file(s) copied into {home}",
              file=sys.stderr, flush=True)
    except OSError as error:
        print(f"ipu-lab-start: the course could not be copied into {home}: {error}",
              file=sys.stderr, flush=True)
    if argv:
        os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
