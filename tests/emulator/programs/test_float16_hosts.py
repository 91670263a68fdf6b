"""An emulated IPU's float16 numbers do not depend on the host (runtime/float16.py): the same
float16 training program, run with oneDNN's CPU kernels and with Eigen's (the two paths
TensorFlow takes on x86 hosts, by ``TF_ENABLE_ONEDNN_OPTS``), gives the same bits, in TF1 and
TF2; its float32 twin does not, which shows that the two paths really compute differently.
Four children, each a TF1 or TF2 program trained in float16 and in float32
(tests/layouts/float16_kernel_paths.py): the two on the host's default path (oneDNN's on most
x86 hosts, Eigen's on some AMD ones) fork from the preloaded Python (``run_code``), the two on
the other path start anew; about 15 s of CPU on one worker (an AVX2-only AMD EPYC)."""
import pytest

from tests.support.child_python import ROOT, child_env, run_code

PROGRAM = ROOT / "tests" / "layouts" / "float16_kernel_paths.py"


def run(mode, onednn_setting):
    env = child_env(TF_ENABLE_ONEDNN_OPTS=onednn_setting)
    return run_code(PROGRAM.read_text(), mode, env=env).check().stdout.splitlines()


def digests(mode):
    """The program's digests ({dtype: digest}) with oneDNN's kernels and with Eigen's, every
    value finite (it trained, rather than agreeing on nan).  The host's default path is run
    first, forked; the other is asked for by the variable, in a new process.  (Until
    2026-12-01 oneDNN's run came first on every host: where the default is Eigen's, as on an
    AVX2-only AMD EPYC, that forked run was thrown away and both paths started anew, a
    TensorFlow process more per mode.)"""
    default = run(mode, None)
    default_is_onednn = "onednn True" in default
    by_path = {default_is_onednn: default,
               not default_is_onednn: run(mode, "0" if default_is_onednn else "1")}
    found = []
    for onednn in (True, False):
        lines = by_path[onednn]
        assert f"onednn {onednn}" in lines, lines[:1]
        assert {"float16 finite True", "float32 finite True"} <= set(lines)
        found.append(dict(line.split(" digest ") for line in lines if " digest " in line))
    return found


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_float16_programs_give_the_same_bits_on_both_kernel_paths(mode):
    with_onednn, with_eigen = digests(mode)
    assert with_onednn["float16"] == with_eigen["float16"]
    # The float32 twin: the two paths really compute differently.
    assert with_onednn["float32"] != with_eigen["float32"]
