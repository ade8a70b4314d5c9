"""Live updates priced beside polling: a computed line, from the price table and measured figures.

Nothing here runs the stack. A status poll's cost comes from the cost benchmark's measurements
(the status function's billed duration, memory, log and response bytes); the live-update path is
counted from what the code does per session and per job:
- per session (one WebSocket connection): a ticket (one HTTP API request, one tickets invocation,
  one PutItem), the authorizer (one invocation, one conditional DeleteItem), $connect (one
  invocation, a PutItem and a Query), $disconnect (one invocation, a DeleteItem), the connection
  minutes (billed per started minute), and a ping + pong each 5 minutes;
- per job: one message per pushed write (Pending, Running, Succeeded: 3, each under 32 KB), and
  the notifier: one Query of the owner's connections per invocation, one invocation per record
  when traffic is quiet (3 a job), a hundredth of that in busy batches of 100.
The small functions' durations are not measured: each is taken as the status function's
measured billed duration (the same kind of work: one or two DynamoDB calls).

`python -m outlast.bench.push` adds the line to docs/benchmarks.json (the `cost` section) and
rewrites docs/benchmarks.md, without rerunning anything; `make bench` computes it too.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from outlast.bench.prices import PRICES_PATH, PriceTable, load_prices

PUSHES_PER_JOB = 3  # Pending, Running, Succeeded (heartbeats and deferrals are filtered out)
PING_INTERVAL_MINUTES = 5
BUSY_BATCH = 100
SMALL_FUNCTION_MEMORY_MB = 256
PER_MILLION = 1e6


@dataclass(frozen=True)
class PollCost:
    """One status poll, priced from the cost benchmark's measurements."""

    usd: float
    billed_ms: float
    memory_mb: int

    @classmethod
    def from_cost(cls, cost: dict[str, Any], prices: PriceTable) -> PollCost:
        """From the `cost` section of docs/benchmarks.json."""
        billed_ms = float(cost["billedMs"][f"batch{cost['batch']}"]["status"])
        memory = int(cost["memoryMb"]["status"])
        per_job = cost["perJob"]
        polls = float(per_job["invocations"]["status"])
        log_bytes = float(per_job["logs"]["byFunction"].get("status", 0.0)) / polls + float(
            per_job["logs"]["platformBytesPerInvocation"]
        )
        # Response bytes: the submit's and the polls' answers are about one status document each.
        response_bytes = float(per_job["apiResponseBytes"]) / (polls + 1)
        usd = (
            prices.cost("apiGatewayHttpRequest", 1)
            + prices.cost("lambdaRequest", 1)
            + prices.cost("lambdaArmGbSecond", billed_ms / 1000 * memory / 1024)
            + prices.cost("dynamodbReadRequestUnit", 1)  # one strongly consistent GetItem under 4 KB
            + prices.cost("cloudwatchLogsIngestedGb", log_bytes / 2**30)
            + prices.cost("dataTransferOutInternetGb", response_bytes / 2**30)
        )
        return cls(usd=usd, billed_ms=billed_ms, memory_mb=memory)


def _invocation(prices: PriceTable, billed_ms: float) -> float:
    return prices.cost("lambdaRequest", 1) + prices.cost(
        "lambdaArmGbSecond", billed_ms / 1000 * SMALL_FUNCTION_MEMORY_MB / 1024
    )


def session_cost(prices: PriceTable, billed_ms: float, session_minutes: float) -> float:
    """Dollars for one WebSocket session (ticket, authorizer, connect, disconnect, minutes, pings)."""
    pings = math.floor(session_minutes / PING_INTERVAL_MINUTES)
    return (
        prices.cost("apiGatewayHttpRequest", 1)  # POST /v1/realtime/tickets
        + 4 * _invocation(prices, billed_ms)  # tickets, authorizer, $connect, $disconnect
        + prices.cost("dynamodbWriteRequestUnit", 4)  # ticket put, ticket delete, connection put and delete
        + prices.cost("dynamodbReadRequestUnit", 1)  # $connect's Query of the owner's connections
        + prices.cost("apiGatewayWebSocketConnectionMinute", math.ceil(session_minutes))
        + prices.cost("apiGatewayWebSocketMessage", 2 * pings)  # ping in, pong out
        + pings * _invocation(prices, billed_ms)  # $default answers each ping
    )


def job_cost(prices: PriceTable, billed_ms: float, batch: int) -> float:
    """Dollars per job for its pushes: the messages and the notifier's share."""
    invocations = PUSHES_PER_JOB / batch
    return (
        prices.cost("apiGatewayWebSocketMessage", PUSHES_PER_JOB)
        + invocations * _invocation(prices, billed_ms)
        + prices.cost("dynamodbReadRequestUnit", invocations)  # a Query per owner per batch
    )


def estimate(
    cost: dict[str, Any],
    prices: PriceTable,
    *,
    session_minutes: float = 60.0,
    jobs_per_session: int = 20,
) -> dict[str, Any]:
    """Push beside polling, per million jobs, and where push becomes the cheaper path."""
    poll = PollCost.from_cost(cost, prices)
    polls = int(cost.get("statusPollsPerJob", 3))
    session = session_cost(prices, poll.billed_ms, session_minutes)
    quiet, busy = job_cost(prices, poll.billed_ms, 1), job_cost(prices, poll.billed_ms, BUSY_BATCH)
    one_job_session = session_cost(prices, poll.billed_ms, 1.0) + quiet

    def per_million(value: float) -> float:
        return round(value * PER_MILLION, 2)

    per_job_shared = session / jobs_per_session
    # Sessions of this length beat 3 polls once they carry this many jobs (busy notifier).
    margin = polls * poll.usd - busy
    break_even_jobs = math.ceil(session / margin) if margin > 0 else None
    return {
        "assumptions": {
            "sessionMinutes": session_minutes,
            "jobsPerSession": jobs_per_session,
            "pushesPerJob": PUSHES_PER_JOB,
            "pingEveryMinutes": PING_INTERVAL_MINUTES,
            "smallFunctionBilledMs": poll.billed_ms,
            "smallFunctionMemoryMb": SMALL_FUNCTION_MEMORY_MB,
            "busyNotifierBatch": BUSY_BATCH,
            "prices": {
                key: {"usd": prices[key].usd, "per": prices[key].per}
                for key in ("apiGatewayWebSocketMessage", "apiGatewayWebSocketConnectionMinute")
            },
        },
        "pollUsdPerMillion": per_million(poll.usd),
        "pollingUsdPerMillionJobs": per_million(polls * poll.usd),
        "pushUsdPerMillionJobs": {
            "sharedSessionQuiet": per_million(per_job_shared + quiet),
            "sharedSessionBusy": per_million(per_job_shared + busy),
            "oneSessionPerJob": per_million(one_job_session),
        },
        "perMillionJobs": {
            "messages": PUSHES_PER_JOB * PER_MILLION,
            "connectionMinutes": round(math.ceil(session_minutes) / jobs_per_session * PER_MILLION),
            "notifierInvocationsQuiet": PUSHES_PER_JOB * PER_MILLION,
            "notifierInvocationsBusy": PUSHES_PER_JOB / BUSY_BATCH * PER_MILLION,
        },
        "sessionUsd": round(session, 8),
        "breakEvenJobsPerSession": break_even_jobs,
        "breakEvenPollsOneSessionPerJob": math.ceil(one_job_session / poll.usd),
    }


def main() -> None:
    """Add the computed line to docs/benchmarks.json and rewrite docs/benchmarks.md."""
    from outlast.bench import report  # noqa: PLC0415

    json_path = PRICES_PATH.parent / "benchmarks.json"
    document: dict[str, Any] = json.loads(json_path.read_text())
    document["cost"]["push"] = estimate(document["cost"], load_prices())
    json_path.write_text(json.dumps(document, indent=2) + "\n")
    (json_path.parent / "benchmarks.md").write_text(report.markdown(document))


if __name__ == "__main__":
    main()
