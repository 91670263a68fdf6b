"""The rehearsal closes each run's session and kernel as a learner closing a notebook does.
A kernel the memory limit killed is restarted by its server, and until that restart is over
jupyter_client refuses to shut it down (500, InvalidStateError) and keeps its session: the
learner's next run would be handed that half-shut kernel and wait ten minutes for a reply
(seen on 2026-12-01 under load).  A refused DELETE is tried again; a gone one is not.
A local HTTP server stands in for the learner's Jupyter server (no hub: well under a second)."""
import http.server
import threading

import pytest

from tests.hub.conftest import classroom


class FakeServer(http.server.BaseHTTPRequestHandler):
    answers = []   # status codes, one per DELETE, the last repeated
    seen = []

    def do_DELETE(self):  # noqa: N802 (http.server's name)
        FakeServer.seen.append(self.path)
        status = FakeServer.answers[min(len(FakeServer.seen), len(FakeServer.answers)) - 1]
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def learner():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    room = type("Room", (), {"url": f"http://127.0.0.1:{server.server_address[1]}"})()
    FakeServer.seen = []
    yield classroom.Learner(room, "learner01", think=0)
    server.shutdown()
    server.server_close()


def test_a_delete_refused_while_the_kernel_restarts_is_tried_again(learner):
    FakeServer.answers = [500, 500, 204]
    learner.delete("/kernels/k1")
    assert FakeServer.seen == ["/user/learner01/api/kernels/k1"] * 3


@pytest.mark.parametrize("status", [204, 404])
def test_a_delete_done_or_of_a_kernel_already_gone_is_sent_once(learner, status):
    FakeServer.answers = [status]
    learner.delete("/sessions/s1")
    assert FakeServer.seen == ["/user/learner01/api/sessions/s1"]


def test_a_kernel_that_never_settles_is_given_up_after_the_retry_time(learner, monkeypatch):
    monkeypatch.setattr(classroom, "DELETE_RETRY_S", 1.2)
    FakeServer.answers = [500]
    learner.delete("/kernels/k1")
    assert 2 <= len(FakeServer.seen) <= 4, FakeServer.seen
