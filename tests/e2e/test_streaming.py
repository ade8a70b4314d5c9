"""Streaming output end to end on the local stack, over real HTTP and real WebSockets
(DESIGN.md, "Streaming output: a view over persisted events").

The local model server paces its answers (`[[pace:N]]`, tokens a second), so a job's text is
written over seconds and reaches its followers in several messages. Absence is proven by a
condition, never a sleep: a socket that must have received nothing answers our ping with its pong
and no frame before it, once the job has ended for its owner.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

from outlast.reassembly import Reassembly
from tests.support.cli import run
from tests.support.local_stack import RunningStack, joined_attempt, output_events, request_hash, unique

TIMEOUT = 90.0
TERMINAL = {"Succeeded", "Failed", "Canceled"}


def _text(tag: str, directives: str = "") -> str:
    """A unique document long enough for a summary of many words (each streamed on its own)."""
    sentence = " ".join(f"word{n:02d}" for n in range(40))
    return f"{tag} {uuid.uuid4()}. {sentence}. {sentence}. {directives}".strip()


def _submit(stack: RunningStack, token: str, text: str) -> str:
    answer = stack.submit(
        token, {"operation": "summarize", "input": {"text": text}, "options": {"stream": True}}
    )
    assert answer.status == 202, answer.raw
    assert answer.body["stream"] is True
    job_id: str = answer.body["jobId"]
    return job_id


@contextlib.contextmanager
def _socket(stack: RunningStack, token: str) -> Iterator[ClientConnection]:
    ticket = stack.call("POST", "/v1/realtime/tickets", token=token)
    assert ticket.status == 201, ticket.raw
    with connect(ticket.body["url"], open_timeout=TIMEOUT, ping_interval=None, close_timeout=5) as websocket:
        yield websocket


def _follow(websocket: ClientConnection, job_id: str, after: tuple[int, int] | None = None) -> None:
    message: dict[str, Any] = {"action": "follow", "jobId": job_id}
    if after is not None:
        message["after"] = {"attempt": after[0], "seq": after[1]}
    websocket.send(json.dumps(message))


def _frames_until(websocket: ClientConnection, done: Any) -> list[dict[str, Any]]:
    """Every frame received until `done(frame)` is true for one (that one included)."""
    frames: list[dict[str, Any]] = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        frame = json.loads(websocket.recv(timeout=TIMEOUT))
        frames.append(frame)
        if done(frame):
            return frames
    raise AssertionError(f"not done after {len(frames)} frames: {frames[-5:]}")


def _ended(job_id: str) -> Any:
    return lambda f: f.get("type") == "job" and f["job"]["jobId"] == job_id and f["job"]["status"] in TERMINAL


def _grows(text: Reassembly, frame: dict[str, Any]) -> str:
    """Take an output frame into `text`; the text so far."""
    if frame.get("type") == "output":
        text.add(frame["attempt"], frame["seq"], frame["text"])
    return text.text()


def _outputs(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if f.get("type") == "output"]


def _frames_until_pong(websocket: ClientConnection) -> list[dict[str, Any]]:
    websocket.send(json.dumps({"action": "ping"}))
    return _frames_until(websocket, lambda f: f == {"type": "pong"})[:-1]


def _result(stack: RunningStack, token: str, job_id: str) -> str:
    answer = stack.call("GET", f"/v1/jobs/{job_id}/result", token=token)
    assert answer.status == 200, answer.raw
    return str(answer.body["output"])


def test_a_paced_job_arrives_in_several_messages_before_it_ends_and_they_join_to_its_result(
    stack: RunningStack,
) -> None:
    # Given Alice following her paced streaming job
    token = stack.token(unique("stream-alice"))
    with _socket(stack, token) as websocket:
        job_id = _submit(stack, token, _text("Paced", "[[pace:25]]"))
        _follow(websocket, job_id)

        # When it runs to its end
        frames = _frames_until(websocket, _ended(job_id))
        assert frames[-1]["job"]["status"] == "Succeeded"
        before_the_end = _outputs(frames)
        result = _result(stack, token, job_id)
        # (the job's status and its last events come by two streams: the last may come after it)
        text = Reassembly()
        for frame in before_the_end:
            text.add(frame["attempt"], frame["seq"], frame["text"])
        if text.text() != result:
            frames += _frames_until(websocket, lambda f: _grows(text, f) == result)

    # Then several output messages came before the job ended, and they all join to its result
    assert len(before_the_end) >= 3, before_the_end
    assert all(frame["jobId"] == job_id for frame in _outputs(frames))
    assert text.text() == result
    page = output_events(stack, token, job_id)
    assert page["resultAttempt"] == 1
    assert joined_attempt(page["events"], 1) == _result(stack, token, job_id)


def test_a_second_device_following_mid_way_with_a_cursor_gets_the_rest_without_gaps_or_repeats(
    stack: RunningStack,
) -> None:
    token = stack.token(unique("stream-two-devices"))
    with _socket(stack, token) as first:
        job_id = _submit(stack, token, _text("Two devices", "[[pace:15]]"))
        _follow(first, job_id)
        # The first device has some of the text...
        seen = _outputs(_frames_until(first, lambda f: f.get("type") == "output" and f["seq"] >= 2))
        cursor = (seen[-1]["attempt"], seen[-1]["seq"])
        # ...when the second follows from there
        with _socket(stack, token) as second:
            _follow(second, job_id, after=cursor)
            frames = _frames_until(second, _ended(job_id))
            result = _result(stack, token, job_id)
            text = Reassembly()
            for frame in seen + _outputs(frames):
                text.add(frame["attempt"], frame["seq"], frame["text"])
            if text.text() != result:  # its last events may come after the job's end
                frames += _frames_until(second, lambda f: _grows(text, f) == result)
            rest = _outputs(frames)

    # Then it gets every later event once its repeats are dropped, and nothing from before the cursor
    positions = {(f["attempt"], f["seq"]) for f in rest}
    assert all(position > cursor for position in positions)
    assert not text.has_gap(1)
    assert text.text() == result
    final = len(output_events(stack, token, job_id)["events"])
    assert positions == {(1, seq) for seq in range(cursor[1] + 1, final + 1)}


def test_another_users_follow_gets_the_error_and_nothing_else(stack: RunningStack) -> None:
    owner = stack.token(unique("stream-owner"))
    intruder = stack.token(unique("stream-intruder"))
    with _socket(stack, owner) as mine, _socket(stack, intruder) as theirs:
        job_id = _submit(stack, owner, _text("Private", "[[pace:30]]"))
        _follow(theirs, job_id)
        answer = _frames_until(theirs, lambda f: f.get("type") == "error")
        _follow(mine, job_id)
        assert _outputs(_frames_until(mine, _ended(job_id)))

        # Then the intruder got the one error, and after the job ended, still nothing else
        assert answer == [{"type": "error", "code": "job_not_found", "message": "No such job."}]
        assert _frames_until_pong(theirs) == []


def test_a_stream_cut_mid_way_makes_a_new_attempt_whose_text_replaces_the_first(stack: RunningStack) -> None:
    token = stack.token(unique("stream-cut"))
    job_id = _submit(stack, token, _text("Cut", "[[fault:stream_cut*1]]"))

    done = stack.wait_terminal(job_id, token)

    assert done["status"] == "Succeeded"
    page = output_events(stack, token, job_id)
    assert page["resultAttempt"] == 2
    cut, whole = joined_attempt(page["events"], 1), joined_attempt(page["events"], 2)
    assert whole == _result(stack, token, job_id)
    assert cut
    assert whole.startswith(cut)  # the same answer, cut short the first time
    assert done["usage"]["estimated"] is True  # the cut call's cost is an estimate


def test_a_redriven_streaming_job_streams_a_new_attempt_that_outranks_the_old_ones(
    stack: RunningStack,
) -> None:
    # Given a streaming job whose three streams were all cut: it failed, out of attempts
    token = stack.token(unique("stream-redrive"))
    job_id = _submit(stack, token, _text("Redriven", "[[fault:stream_cut*3]]"))
    failed = stack.wait_terminal(job_id, token)
    assert (failed["status"], failed["error"]["code"]) == ("Failed", "retries_exhausted")

    # When on-call redrives it
    code, _, err = run("ops", "jobs", "redrive", job_id, "--local", "--port", str(stack.port))
    assert code == 0, err
    done = stack.wait_terminal(job_id, token)

    # Then its new attempt (the fourth: the counter is never reset) is the result's
    assert done["status"] == "Succeeded"
    page = output_events(stack, token, job_id)
    assert page["resultAttempt"] == 4
    assert {e["attempt"] for e in page["events"]} == {1, 2, 3, 4}
    assert joined_attempt(page["events"], 4) == _result(stack, token, job_id)


def test_cancel_mid_stream_ends_canceled_with_the_text_so_far_and_closes_the_stream(
    stack: RunningStack,
) -> None:
    # Given a slowly paced streaming job that has written some of its text
    token = stack.token(unique("stream-cancel"))
    text = _text("Canceled", "[[pace:4]]")
    with _socket(stack, token) as websocket:
        job_id = _submit(stack, token, text)
        _follow(websocket, job_id)
        _frames_until(websocket, lambda f: f.get("type") == "output")

        # When its owner cancels it
        assert stack.call("POST", f"/v1/jobs/{job_id}/cancellation", token=token).status == 202
        frames = _frames_until(websocket, _ended(job_id))

    # Then it ends Canceled, its text so far stays readable, and the result is a 409
    assert frames[-1]["job"]["status"] == "Canceled"
    page = output_events(stack, token, job_id)
    so_far = joined_attempt(page["events"], 1)
    assert so_far
    assert page["complete"] is True
    assert page["resultAttempt"] is None
    assert stack.call("GET", f"/v1/jobs/{job_id}/result", token=token).status == 409
    # And the model server saw its client close the stream before the answer was whole
    calls = stack.model_calls(request_hash("summarize", text), at_least=1)
    assert [call["outcome"] for call in calls] == ["closed_early"]
    assert frames[-1]["job"]["usage"]["estimated"] is True


def test_the_cli_streams_the_text_to_stdout_as_it_is_written(
    stack: RunningStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    token = stack.token(unique("stream-cli"))
    monkeypatch.setenv("OUTLAST_TOKEN", token)
    monkeypatch.setenv("OUTLAST_API_URL", stack.url)

    code, out, err = run("submit", "summarize", "--text", _text("CLI", "[[pace:40]]"), "--stream")

    assert code == 0, err
    job_id = next(line.split()[1] for line in err.splitlines() if line.startswith("job "))
    assert out == _result(stack, token, job_id) + "\n"
    code, again, _ = run("output", job_id)
    assert (code, again) == (0, out)
