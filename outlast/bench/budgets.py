"""Token budgets priced: what a budget adds per job, a computed line (DESIGN.md, "Token budgets").

Nothing here runs the stack. The units are counted from the items the ledger adapter itself
writes (`shared.adapters.dynamodb_budgets`: the reservation item and the period's counter, built
here for a typical job) under DynamoDB's billing rules:
- a write in a transaction costs 2 write units per started KB of the item (an Update, the larger
  of the item before and after it); a write to a global secondary index 1 per started KB of the
  projection;
- a read of up to 4 KB eventually consistent costs 0.5 read units (an item that is not there too).
A job of a tenant with a limit: the reservation (Put reservation + Update counter, its index entry
in), then the settlement (Update closing the reservation + Update counter, its index entry out;
the closed reservation stays as the record of what the run was charged). Every submit
reads the tenant's budget (limit and counter, one BatchGetItem of two items) to learn whether it
has a limit, so a tenant without one pays that read and no write; an ended budgeted job's status
read asks whether it is settled (a keys-only BatchGetItem). The job item itself carries its hold
(`budgetPeriod`, `budgetTokens`): counted here too, in case it crosses a KB.

`python -m outlast.bench.budgets` adds the line to docs/benchmarks.json (the `cost` section) and
writes its own section of docs/benchmarks.md (the rest of the file is left as the last run wrote
it), without rerunning anything; `make bench` computes it too.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from outlast.bench.prices import PRICES_PATH, PriceTable, load_prices
from shared import resources as r
from shared.adapters.dynamo_items import job_to_item, serialize
from shared.adapters.dynamodb_budgets import counter_key, reservation_to_item
from shared.budgets import ReservationRef, new_reservation
from shared.ids import new_job_id, new_sequence_id
from shared.job import BudgetHold, JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.plan_parameters import PlanParameters

TRANSACTION_FACTOR = 2  # transactional writes cost twice a standard write
EVENTUAL_READ_UNITS = 0.5  # an eventually consistent read of up to 4 KB
STATUS_POLLS_OF_AN_ENDED_JOB = 1  # the cost model's third poll (after Succeeded)
PER_MILLION = 1e6
_NOW = datetime(2030, 1, 15, 12, 0, tzinfo=UTC)
_TENANT = "tenant-of-a-typical-length"
_TOKENS = 987_654


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB bills it: attribute names plus values (strings and numbers)."""
    total = 0
    for name, value in item.items():
        total += len(name.encode("utf-8"))
        ((kind, content),) = value.items()
        if kind == "S":
            total += len(content.encode("utf-8"))
        elif kind == "N":
            digits = content.lstrip("-").replace(".", "").strip("0") or "0"
            total += (len(digits) + 1) // 2 + 1
        elif kind == "BOOL":
            total += 1
        else:
            raise ValueError(f"an unexpected attribute type {kind} ({name})")
    return total


def _kb(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def _reservation_item() -> dict[str, Any]:
    reservation = new_reservation(
        _TENANT,
        ReservationRef(new_job_id(), 0),
        _TOKENS,
        now=_NOW,
        period="2030-01",
        held_until=_NOW + timedelta(hours=24),
        grace=timedelta(seconds=900),
    )
    return reservation_to_item(reservation)


def _counter_item() -> dict[str, Any]:
    return {
        **counter_key(_TENANT, "2030-01"),
        **serialize(
            {
                "usedTokens": 123_456_789,
                "reservedTokens": 12_345_678,
                "committedTokens": 135_802_467,
                r.TTL_ATTRIBUTE: 1_900_000_000,
            }
        ),
    }


def _job_item(hold: BudgetHold | None) -> dict[str, Any]:
    """A typical job item at its terminal write (what every later write of it pays for)."""
    job = JobRecord(
        job_id=new_job_id(),
        tenant=_TENANT,
        owner="3b7c1d2e-8f4a-4c6b-9d1e-2f3a4b5c6d7e",
        operation="summarize",  # type: ignore[arg-type]
        status=JobStatus.SUCCEEDED,
        created_at=_NOW,
        updated_at=_NOW,
        expires_at=_NOW + timedelta(days=30),
        attempts=1,
        sequence_id=new_sequence_id(),
        model="gpt-4o-mini",
        prompt_version="summarize-v1",
        input_location="item",
        max_attempts=3,
        dispatch_at=_NOW,
        usage=Usage(input_tokens=1_234, output_tokens=567),
        result_location="item",
        revision=5,
        plan=PlanParameters(),
        budget=hold,
    )
    return job_to_item(job, sweep_at=None)


def units() -> dict[str, Any]:
    """Write and read units per job, for a tenant with a limit and one without."""
    reservation = _kb(item_bytes(_reservation_item()))
    counter = _kb(item_bytes(_counter_item()))
    reserve = TRANSACTION_FACTOR * (reservation + counter)
    settle = TRANSACTION_FACTOR * (reservation + counter)
    index = 2 * reservation  # the open-reservations index: the entry goes in, then out
    plain, held = _job_item(None), _job_item(BudgetHold(period="2030-01", tokens=_TOKENS))
    job_growth = _kb(item_bytes(held)) - _kb(item_bytes(plain))
    # The job item is written about 5 times in a typical life (submit, claim, progress, terminal...):
    # a hold that pushed it past a KB boundary would cost one more unit each time.
    job_writes = 5 * job_growth
    budget_read = 2 * EVENTUAL_READ_UNITS  # the limit item and the counter, both small
    settled_read = STATUS_POLLS_OF_AN_ENDED_JOB * EVENTUAL_READ_UNITS
    return {
        "itemBytes": {
            "reservation": item_bytes(_reservation_item()),
            "counter": item_bytes(_counter_item()),
            "jobWithoutHold": item_bytes(plain),
            "jobWithHold": item_bytes(held),
        },
        "withLimit": {
            "writeUnitsTables": reserve + settle + job_writes,
            "writeUnitsIndexes": index,
            "readUnits": budget_read + settled_read,
            "breakdown": {
                "reserve (transaction: Put reservation, Update counter)": reserve,
                "settle (transaction: Update closing the reservation, Update counter)": settle,
                "open-reservations index (entry in, entry out)": index,
                "job item grown by its hold (5 writes)": job_writes,
            },
        },
        "withoutLimit": {"writeUnitsTables": 0, "writeUnitsIndexes": 0, "readUnits": budget_read},
    }


def estimate(prices: PriceTable) -> dict[str, Any]:
    """The units and what they cost per million jobs."""
    counted = units()

    def usd(entry: dict[str, Any]) -> float:
        writes = entry["writeUnitsTables"] + entry["writeUnitsIndexes"]
        return round(
            (
                prices.cost("dynamodbWriteRequestUnit", writes)
                + prices.cost("dynamodbReadRequestUnit", entry["readUnits"])
            )
            * PER_MILLION,
            2,
        )

    return {
        **counted,
        "usdPerMillionJobs": {
            "withLimit": usd(counted["withLimit"]),
            "withoutLimit": usd(counted["withoutLimit"]),
        },
    }


SECTION = "### Token budgets: what a budget adds per job"
NEXT_SECTION = "### How these numbers are made"


def splice(markdown: str, section: str) -> str:
    """The report with this line's section put in (replacing an earlier one), before the method notes."""
    start = markdown.find(SECTION)
    end = markdown.find(NEXT_SECTION)
    if end < 0:
        raise ValueError(f"docs/benchmarks.md has no {NEXT_SECTION!r} heading to put the section before")
    if start < 0 or start > end:
        start = end
    return markdown[:start] + section + "\n" + markdown[end:]


def main() -> None:
    """Add the computed line to docs/benchmarks.json and its section to docs/benchmarks.md."""
    from outlast.bench import report  # noqa: PLC0415

    json_path = PRICES_PATH.parent / "benchmarks.json"
    document: dict[str, Any] = json.loads(json_path.read_text())
    document["cost"]["budgets"] = estimate(load_prices())
    json_path.write_text(json.dumps(document, indent=2) + "\n")
    markdown_path = json_path.parent / "benchmarks.md"
    markdown_path.write_text(
        splice(markdown_path.read_text(), report.budget_section(document["cost"]["budgets"]))
    )


if __name__ == "__main__":
    main()
