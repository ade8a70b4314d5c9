"""Follow and unfollow a job's streamed output (DESIGN.md, "Streaming output").

A follow is answered in this order: the owner check (a job that is missing, expired or someone
else's gets the same `job_not_found` frame and nothing else), the follow written (the
connection's list, at most 20 jobs, then the follow keyed by job, which the output pusher reads
consistently), the events after the cursor read consistently and posted to this connection, and
last the route's own answer, `{"type": "following"}`. An event written after the follow reaches
the connection through the pusher; one written before it, through the replay: none falls between
the two. Both paths may deliver the same event, and live events may overtake replayed ones:
clients keep, per attempt, the contiguous prefix and buffer what arrives past a gap.
"""

from __future__ import annotations

import json
from typing import Any

from functions.ws_follow.dependencies import FollowDependencies
from shared.job import Caller
from shared.observability import bind_job, logger, metrics
from shared.output import (
    MAX_FOLLOWS_PER_CONNECTION,
    FollowRefused,
    FollowRequest,
    following_frame,
    job_not_found,
    output_message,
    parse_follow,
    unfollowed_frame,
)
from shared.output_ports import ConnectionClosedError, Follow, TooManyFollowsError
from shared.realtime import RouteEvent
from shared.realtime_ports import PostOutcome

# Events read per replay request (each is at most a write unit: a page is at most ~100 KB).
_REPLAY_PAGE = 100
_TOO_MANY_FOLLOWS = (
    "too_many_follows",
    f"A connection follows at most {MAX_FOLLOWS_PER_CONNECTION} jobs: unfollow one first.",
)
_CONNECTION_CLOSED = ("connection_closed", "This connection is closing; open a new one.")


def handle(deps: FollowDependencies, event: RouteEvent) -> dict[str, Any]:
    """Answer one follow or unfollow message (the route response carries the frame)."""
    try:
        request = parse_follow(event.body)
        bind_job(request.job_id)
        if event.owner is None:
            # Only the ticket authorizer lets a connection in, and it always names the owner.
            logger.error("message without an owner in the authorizer context")
            raise job_not_found()
        if request.action == "unfollow":
            deps.follows.remove_follow(event.owner, event.connection_id, request.job_id)
            frame = unfollowed_frame(request.job_id)
        else:
            follow(deps, event, event.owner, request)
            frame = following_frame(request.job_id)
    except FollowRefused as refused:
        metrics.add_metric(name="FollowsRefused", unit="Count", value=1)
        frame = refused.frame()
    return {"statusCode": 200, "body": json.dumps(frame, separators=(",", ":"))}


def follow(deps: FollowDependencies, event: RouteEvent, owner: Caller, request: FollowRequest) -> None:
    """Check the owner, write the follow, then replay the events after the cursor to this connection."""
    job = deps.jobs.get_job(request.job_id)
    if job is None or not job.is_owned_by(owner) or job.is_expired(deps.clock.now()):
        raise job_not_found()
    try:
        deps.follows.add_follow(
            Follow(
                job_id=job.job_id,
                connection_id=event.connection_id,
                owner=owner,
                connected_at=event.connected_at,
            ),
            MAX_FOLLOWS_PER_CONNECTION,
        )
    except TooManyFollowsError:
        raise FollowRefused(*_TOO_MANY_FOLLOWS) from None
    except ConnectionClosedError:
        raise FollowRefused(*_CONNECTION_CLOSED) from None
    replayed = replay(deps, event.connection_id, request) if job.stream else 0
    metrics.add_metric(name="Follows", unit="Count", value=1)
    logger.info("following", extra={"connection_id": event.connection_id, "replayed": replayed})


def replay(deps: FollowDependencies, connection_id: str, request: FollowRequest) -> int:
    """Post every live event after the cursor to the connection, in order; the count posted."""
    after, posted = request.after, 0
    while True:
        events = deps.events.events_after(request.job_id, after, _REPLAY_PAGE, deps.clock.now())
        for event in events:
            if deps.gateway.post(connection_id, output_message(event)) is PostOutcome.GONE:
                return posted  # the connection went away: nothing left to replay to
            posted += 1
        if len(events) < _REPLAY_PAGE:
            return posted
        after = events[-1].position
