"""Command line: ``python -m ipu_emulator run [--tf1] script.py ARGS...`` and
``python -m ipu_emulator simulate --stages S --micro-batches M --schedule NAME ...``."""
import argparse
import sys

from ipu_emulator import runner, simulate_cli


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
        description=simulate_cli.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    simulate_cli.add_arguments(simulate_parser)
    options = parser.parse_args(argv)
    if options.command == "run":
        return runner.run(options)
    if options.command == "simulate":
        try:
            return simulate_cli.run(options)
        except BrokenPipeError:  # e.g. `... --json | head`: the reader has all it wanted
            sys.stdout = None  # nothing more can reach the closed pipe, not even at exit
            return 0
    parser.error("unknown command %r" % options.command)
    return 2


if __name__ == "__main__":
    sys.exit(main())
