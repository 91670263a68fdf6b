"""The test times count Chromium's renderers (tests/support/unwaited_cpu.py), which nothing in
the test process's tree waits for.  A child Python (Playwright allows one instance per thread,
and this folder's is open) starts Chromium, runs a fixed amount of JavaScript in two pages, one
of them closed before the browser, and closes it: the CPU read under Chromium's zygotes must
keep the closed page's work, hold both pages' work when the browser closes, and be no part of
what the child waited for (else the times would count it twice).  About 2 s of CPU: each page's
work is about 0.66 s of a renderer's CPU, twice the least the test tells from noise."""
import json

from tests.support.child_python import ROOT, run_python

CHILD = f"""
import json, os, resource, sys
sys.path.insert(0, {str(ROOT)!r})
from tests.support import unwaited_cpu
from tests.support.lab_driver import chromium_for_tests

WORK = '''() => {{ let x = 1;
  for (let i = 0; i < 40_000_000; i++) x = (x * 48271) % 2147483647;
  return x; }}'''

def waited():
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime

def under_zygotes():
    return unwaited_cpu.zygote_cpu_seconds(os.getpid())

before = waited()
with chromium_for_tests() as browser:
    started = under_zygotes()
    closed = browser.new_context()
    closed.new_page().evaluate(WORK)
    worked = under_zygotes()
    closed.close()          # its renderer ends, reaped by a zygote
    browser.new_page().evaluate(WORK)
    after_close = under_zygotes()
print(json.dumps(dict(one_page=worked - started, both_pages=after_close - started,
                      counted=unwaited_cpu.seconds(), waited=waited() - before)))
"""


def test_the_renderers_cpu_is_counted_once():
    seconds = json.loads(run_python(CHILD).check().stdout.splitlines()[-1])
    one_page = seconds["one_page"]
    assert one_page > 0.3, seconds                               # the work is seen
    assert seconds["both_pages"] > 1.6 * one_page, seconds       # the closed page's is kept
    assert seconds["counted"] >= seconds["both_pages"], seconds  # and counted at the close
    assert seconds["waited"] < seconds["both_pages"], seconds    # not also waited for
