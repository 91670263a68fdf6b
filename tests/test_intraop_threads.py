"""tests/support/intraop_threads.py: the processes the tests start run TensorFlow's intra-op
pool on one thread (one child forked from the preloaded Python: about 0.3 s of CPU)."""
import os

from tests.support import intraop_threads
from tests.support.child_python import child_env, run_code

# The threads a first session adds, by name: TensorFlow names its inter-op pool's threads
# (tf_Compute) and its graph runner's; the intra-op pool's keep the creating thread's name.
NEW_THREADS = """\
import collections, os
import numpy as np
import tensorflow as tf

def threads():
    return collections.Counter(open(f"/proc/self/task/{t}/comm").read().strip()
                               for t in os.listdir("/proc/self/task"))

before = threads()
with tf.Graph().as_default():
    x = tf.compat.v1.placeholder(tf.float32, [256, 256])
    with tf.compat.v1.Session() as session:
        session.run(tf.matmul(x, x), {x: np.ones((256, 256), np.float32)})
new = threads() - before
print(sum(count for name, count in new.items() if not name.startswith("tf_")))
"""


def test_a_childs_first_session_splits_ops_over_one_intra_op_thread():
    assert os.environ.get(intraop_threads.VARIABLE) == "1", \
        "the root conftest.py sets it for the run (IPU_LAB_ONE_INTRAOP_THREAD=0 leaves it out)"
    assert child_env()[intraop_threads.VARIABLE] == "1"
    result = run_code(NEW_THREADS).check()
    assert int(result.stdout.split()[-1]) == 1, result.stdout


def test_the_setting_is_one_thread_the_shells_own_wins_and_it_can_be_left_out():
    environ = {}
    intraop_threads.apply(environ)
    assert environ == {"TF_NUM_INTRAOP_THREADS": "1"}
    environ = {"TF_NUM_INTRAOP_THREADS": "4"}
    intraop_threads.apply(environ)
    assert environ == {"TF_NUM_INTRAOP_THREADS": "4"}
    environ = {"IPU_LAB_ONE_INTRAOP_THREAD": "0"}
    intraop_threads.apply(environ)
    assert "TF_NUM_INTRAOP_THREADS" not in environ
