"""An emulated IPU's float16 numbers do not depend on the host (runtime/float16.py): the same
float16 training program, run with oneDNN's CPU kernels and with Eigen's (the two paths
TensorFlow takes on x86 hosts, by ``TF_ENABLE_ONEDNN_OPTS``), gives the same bits, in TF1 and
TF2; its float32 twin does not, which shows that the two paths really compute differently.
Six children, each a TF1 or TF2 program (tests/layouts/float16_kernel_paths.py): about 50 s
of CPU on one worker."""
import pytest

from tests.support.child_python import ROOT, child_env, run_python

PROGRAM = ROOT / "tests" / "layouts" / "float16_kernel_paths.py"


def digests(mode, dtype):
    """The program's digest with oneDNN's kernels and with Eigen's (every value finite: it
    trained, rather than agreeing on nan)."""
    found = []
    for onednn in ("1", "0"):
        child = run_python(PROGRAM.read_text(), mode, dtype,
                           env=child_env(TF_ENABLE_ONEDNN_OPTS=onednn)).check()
        assert "finite True" in child.stdout.splitlines()
        [line] = [line for line in child.stdout.splitlines() if line.startswith("digest ")]
        found.append(line)
    return found


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_float16_programs_give_the_same_bits_on_both_kernel_paths(mode):
    with_onednn, with_eigen = digests(mode, "float16")
    assert with_onednn == with_eigen


def test_the_two_kernel_paths_differ_in_float32():
    with_onednn, with_eigen = digests("tf1", "float32")
    assert with_onednn != with_eigen
