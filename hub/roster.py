"""The class's roster for an isolated `make hub`: who may sign in, each with a code of their own.

The instructor names the learners (``HUB_ROSTER``: a file, one name a line) or asks for a
number of them (``HUB_LEARNERS``: learner01, learner02, ...).  Each name gets a sign-in code,
made once and kept in the hub's private state folder with the roster (``roster.json``, readable
by root alone); the start banner points to the class sheet, ``class-sheet.txt`` beside it, one
line a learner to cut out and hand over.  A learner signs in with their name and code and may
change it to a password of their own at /hub/auth/change-password.

The codes live where the authenticator keeps its passwords: JupyterHub's
FirstUseAuthenticator (jupyterhub-firstuseauthenticator) stores a bcrypt hash per name in its
database, and this module writes each roster name's hash there once, before anyone signs in,
so nobody can claim a name by signing in first; a name whose password is already stored (a
code changed, or the instructor's) keeps it.  Standard library only, but for bcrypt (the
authenticator's own dependency, in the hub's environment).

    >>> valid_name("ada"), valid_name("learner01"), valid_name("root"), valid_name("Bad Name")
    (True, True, True, False)
    >>> numbered(3)
    ['learner01', 'learner02', 'learner03']
"""
import dbm
import json
import os
import re
import secrets

# The Unix account of a learner is "jupyter-" + their name (hub/isolation.py), so no name can
# be an existing system account; Linux allows 32 characters.
NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,22}$"
CODE_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"   # no 0/o, 1/l/i: read off a sheet


def valid_name(name):
    return re.fullmatch(NAME_PATTERN, name) is not None


def numbered(count):
    return [f"learner{k:02d}" for k in range(1, count + 1)]


def new_code():
    """"k3fq-9xwp": 8 characters from 31 (about 40 bits), a dash for reading."""
    letters = "".join(secrets.choice(CODE_ALPHABET) for _ in range(8))
    return f"{letters[:4]}-{letters[4:]}"


def names_from(roster_file=None, count=None):
    """The roster's names: the file's (one a line; blank lines and '#' comments skipped), else
    ``count`` numbered learners.  A name the hub cannot take raises ValueError."""
    if roster_file:
        with open(roster_file, encoding="utf-8") as f:
            names = [line.split("#")[0].strip().lower() for line in f]
        names = [name for name in names if name]
    else:
        names = numbered(int(count or 0))
    bad = [name for name in names if not valid_name(name)]
    if bad:
        raise ValueError(f"roster names the hub cannot take (lower-case letters, digits, _ and "
                         f"-, starting with a letter, at most 23 characters): {bad}")
    if len(set(names)) != len(names):
        raise ValueError("the roster names someone twice")
    return names


def load(state, names):
    """``{name: code}`` for ``names``, keeping the codes already made (``roster.json`` in
    ``state``) and making the missing ones; written back, with the class sheet, readable by
    the hub's user alone."""
    path = os.path.join(state, "roster.json")
    codes = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            codes = json.load(f)
    roster = {name: codes.get(name) or new_code() for name in names}
    _write_private(path, json.dumps(roster, indent=1))
    _write_private(os.path.join(state, "class-sheet.txt"), "".join(
        f"name: {name:<24} code: {code}\n" for name, code in roster.items()))
    return roster


def _write_private(path, text):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w",
              encoding="utf-8") as f:
        f.write(text)


def seed_passwords(dbm_path, passwords):
    """Store each ``{name: password}`` in the authenticator's database as its bcrypt hash,
    unless that name has a password there already."""
    import bcrypt   # the authenticator's dependency, in the hub's environment

    with dbm.open(dbm_path, "c", 0o600) as db:
        for name, password in passwords.items():
            if db.get(name.encode("utf8")) is None:
                db[name] = bcrypt.hashpw(password.encode("utf8"), bcrypt.gensalt())


def main(argv=None):
    """``python hub/roster.py --learners 25`` (or ``--roster names.txt``): Zero to JupyterHub's
    roster.yaml for hub/z2jh/values.yaml, each name with a new code and the instructor with a
    password, on standard output; keep it, and hand out each learner's line."""
    import argparse
    parser = argparse.ArgumentParser(description=main.__doc__.split("\n")[0])
    parser.add_argument("--learners", type=int, default=0)
    parser.add_argument("--roster")
    args = parser.parse_args(argv)
    names = names_from(args.roster, args.learners)
    lines = ["custom:", "  roster:",
             f'    instructor: "{secrets.token_urlsafe(30)}"']
    lines += [f'    {name}: "{new_code()}"' for name in names]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
