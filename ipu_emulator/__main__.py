"""Command line: ``python -m ipu_emulator run [--tf1] script.py ARGS...``,
``python -m ipu_emulator simulate --stages S --micro-batches M --schedule NAME ...``,
``python -m ipu_emulator progress [HOMES]`` (a class's exercise progress) and
``python -m ipu_emulator install-hook|uninstall-hook [--site-dir DIR]``."""
import argparse
import sys

from ipu_emulator.cli import progress, runner, simulate


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ipu_emulator",
        description="Run Graphcore IPU TensorFlow programs on the CPU and simulate the IPU.")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser(
        "run", help="run an unmodified IPU TensorFlow script",
        description=runner.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    runner.add_arguments(run_parser)
    simulate_parser = commands.add_parser(
        "simulate", help="simulate a pipeline schedule (no TensorFlow needed)",
        description=simulate.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    simulate.add_arguments(simulate_parser)
    progress_parser = commands.add_parser(
        "progress", help="a class's exercise progress on its hub: who is stuck (no TensorFlow)",
        description=progress.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    progress.add_arguments(progress_parser)
    for name, text in (("install-hook", "make `import tensorflow.python.ipu` work under plain "
                                        "python3 in this environment (writes a .pth file)"),
                       ("uninstall-hook", "remove the import hook's .pth file")):
        hook_parser = commands.add_parser(name, help=text, description=text)
        hook_parser.add_argument("--site-dir", default=None,
                                 help="directory for the .pth file (default: this "
                                      "environment's site-packages)")
        if name == "install-hook":
            hook_parser.add_argument("--tf1", action="store_true",
                                     help="switch to TF1 graph mode when the IPU API is first "
                                          "imported (for scripts written for the TF1 SDK)")
    options = parser.parse_args(argv)
    if options.command in ("install-hook", "uninstall-hook"):
        return _hook_command(options)
    if options.command == "run":
        return runner.run(options)
    if options.command == "progress":
        return progress.run(options)
    if options.command == "simulate":
        try:
            return simulate.run(options)
        except BrokenPipeError:  # e.g. `... --json | head`: the reader has all it wanted
            sys.stdout = None  # nothing more can reach the closed pipe, not even at exit
            return 0
    parser.error("unknown command %r" % options.command)
    return 2


def _hook_command(options) -> int:
    from ipu_emulator.cli import startup_hook
    try:
        if options.command == "install-hook":
            path = startup_hook.install_hook(options.site_dir, tf1=options.tf1)
            print("ipu_emulator: import hook installed: %s\n(remove it with "
                  "`python -m ipu_emulator uninstall-hook`)" % path)
            return 0
        path = startup_hook.uninstall_hook(options.site_dir)
    except OSError as error:
        print("ipu_emulator: %s" % error, file=sys.stderr)
        return 1
    print("ipu_emulator: import hook removed: %s" % path if path
          else "ipu_emulator: no import hook was installed there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
