"""hub/roster.py: the names a class may sign in under, a code each, kept across restarts and
stored in the authenticator's database before anyone signs in (the seeding runs in the hub's
own environment, which has bcrypt: build/hub-venv, made by `make hub-tools`)."""
import json
import os
import subprocess
import sys

import pytest

from tests.support.child_python import ROOT

sys.path.insert(0, os.path.join(ROOT, "hub"))
import roster  # noqa: E402  (hub/roster.py)

HUB_PYTHON = os.path.join(ROOT, "build", "hub-venv", "bin", "python")


def test_names_come_from_a_file_or_a_count_and_must_suit_an_account(tmp_path):
    names = tmp_path / "names.txt"
    names.write_text("Ada\n\n# the second row\nbob_2  # a comment\n")
    assert roster.names_from(str(names)) == ["ada", "bob_2"]
    assert roster.names_from(count="3") == ["learner01", "learner02", "learner03"]
    for bad in ("1st", "a name", "x" * 24, "dot.ted"):
        names.write_text(bad + "\n")
        with pytest.raises(ValueError, match="cannot take"):
            roster.names_from(str(names))
    names.write_text("ada\nada\n")
    with pytest.raises(ValueError, match="twice"):
        roster.names_from(str(names))


def test_each_name_keeps_its_code_and_the_sheet_is_roots_alone(tmp_path):
    first = roster.load(str(tmp_path), ["ada", "bob"])
    assert len({*first.values()}) == 2 and all(len(code) == 9 for code in first.values())
    again = roster.load(str(tmp_path), ["ada", "bob", "cy"])
    assert again["ada"] == first["ada"] and again["bob"] == first["bob"] and "cy" in again
    for name in ("roster.json", "class-sheet.txt"):
        assert oct(os.stat(tmp_path / name).st_mode & 0o777) == "0o600"
    sheet = (tmp_path / "class-sheet.txt").read_text()
    assert "name: cy" in sheet and again["cy"] in sheet
    assert json.loads((tmp_path / "roster.json").read_text()) == again


@pytest.mark.hub
def test_codes_are_stored_before_anyone_signs_in_and_a_changed_password_stays(tmp_path):
    seed = (f"import sys; sys.path.insert(0, {os.path.join(ROOT, 'hub')!r}); import roster\n"
            "roster.seed_passwords(sys.argv[1], dict(a.split('=') for a in sys.argv[2:]))\n")
    check = ("import bcrypt, dbm, sys\n"
             "with dbm.open(sys.argv[1]) as db:\n"
             "    print(all(bcrypt.checkpw(p.encode(), db[n.encode()])\n"
             "              for n, p in (a.split('=') for a in sys.argv[2:])))\n")
    path = str(tmp_path / "passwords.dbm")
    subprocess.run([HUB_PYTHON, "-c", seed, path, "ada=abcd-efgh", "bob=hjkm-npqr"], check=True)
    run = [HUB_PYTHON, "-c", check, path]
    assert subprocess.run(run + ["ada=abcd-efgh", "bob=hjkm-npqr"], capture_output=True,
                          text=True).stdout.strip() == "True"
    # A second seeding (the hub restarted) keeps what is stored: a password the learner chose.
    subprocess.run([HUB_PYTHON, "-c", seed, path, "ada=another-code"], check=True)
    assert subprocess.run(run + ["ada=abcd-efgh"], capture_output=True,
                          text=True).stdout.strip() == "True"
