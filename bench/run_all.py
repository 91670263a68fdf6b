"""Run every benchmark in bench/ (each prints its own measured figures and ratios)."""
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).parent
for script in sorted(HERE.glob("*.py")):
    if script.name == "run_all.py" or script.name.startswith("_"):   # _*.py: shared helpers
        continue
    print("=" * 72, "\n%s\n" % script.name + "=" * 72, flush=True)
    subprocess.run([sys.executable, str(script)], check=True)
