"""BudgetLedger on DynamoDB: the budgets table (no stream), written in two-item transactions.

Items (pk / sk):
- `TENANT#{tenant}` / `LIMIT`: `monthlyTokens`, the tenant's own limit (0: none), set by operators.
- `TENANT#{tenant}` / `RUNNING`: `maxRunning`, the tenant's own running cap (shared.adapters.
  dynamodb_tenants), read with the limit by the submit's one budget read.
- `TENANT#{tenant}` / `PERIOD#{YYYY-MM}`: `usedTokens`, `reservedTokens` and `committedTokens`
  (their sum: a condition expression cannot add, so the sum the limit is checked against is kept
  as its own attribute, changed by the same writes).
- `RESERVATION#{jobId}` / `RUN#{run}`: one run's reservation, with the sparse index keys
  (`checkShard`, `checkAt`) the sweeper finds it by while it is open. Settling or releasing it
  closes it: the index keys go and `settledTokens` (what `used` got from this run; 0 when
  released) comes, in the same write, so while it carries `checkShard` its run is unsettled, a
  second settlement finds nothing to do, and the closed item is the ledger's record of what the
  run was charged (until its TTL, with the counters').
- `LATE#{jobId}` / `BATCH#{batchId}`: late usage counted (shared.budgets.LateUsage): the marker
  that makes a (job, batch)'s late tokens come into `used` once.

Every change of a counter is one TransactWriteItems with the reservation it belongs to; the
conditions make each at-most-once. A transaction that conflicts with a concurrent one on the same
counter (DynamoDB cancels one of them) is retried here a few times, then reported as busy storage.
"""

from __future__ import annotations

import random
import time
from collections.abc import Collection, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from shared import resources as r
from shared.adapters.due_index import query_due
from shared.adapters.dynamo_errors import error_code, storage_errors
from shared.adapters.dynamo_items import deserialize, serialize
from shared.adapters.dynamodb_tenants import MAX_RUNNING, RUNNING_SORT_KEY, running_key, tenant_pk
from shared.budgets import (
    BudgetState,
    LateUsage,
    Reservation,
    ReservationRef,
    ReserveOutcome,
    ReserveResult,
    Settlement,
    period_end,
    reservation_shard,
)
from shared.clock import epoch_seconds, from_iso, to_iso
from shared.errors import StorageUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_CANCELED = "TransactionCanceledException"
_CONDITION_FAILED = "ConditionalCheckFailed"
_CONFLICT = "TransactionConflict"
_BATCH_GET_LIMIT = 100
_CONFLICT_ATTEMPTS = 6
# Counters and reservations outlive their period by about a year (what `budgets show` can look
# back on); an open reservation is settled or released long before.
_KEEP = timedelta(days=400)
# An open reservation carries the index key; a closed one `settledTokens` instead.
_OPEN = r.BUDGET_CHECK_PARTITION
_SETTLED = "settledTokens"
_NAMES = {
    "#pk": r.BUDGETS_PARTITION_KEY,
    "#used": "usedTokens",
    "#reserved": "reservedTokens",
    "#committed": "committedTokens",
    "#ttl": r.TTL_ATTRIBUTE,
}


def limit_key(tenant: str) -> dict[str, Any]:
    """The key of a tenant's own limit."""
    return serialize({r.BUDGETS_PARTITION_KEY: tenant_pk(tenant), r.BUDGETS_SORT_KEY: "LIMIT"})


def counter_key(tenant: str, period: str) -> dict[str, Any]:
    """The key of a tenant's counter for one period."""
    return serialize({r.BUDGETS_PARTITION_KEY: tenant_pk(tenant), r.BUDGETS_SORT_KEY: f"PERIOD#{period}"})


def reservation_key(ref: ReservationRef) -> dict[str, Any]:
    """The key of one run's reservation."""
    return serialize(
        {r.BUDGETS_PARTITION_KEY: f"RESERVATION#{ref.job_id}", r.BUDGETS_SORT_KEY: f"RUN#{ref.run}"}
    )


def reservation_to_item(reservation: Reservation) -> dict[str, Any]:
    """The reservation item, open: it carries the sweeper's index keys."""
    return serialize(
        {
            **deserialize(reservation_key(reservation.ref)),
            "jobId": reservation.ref.job_id,
            "run": reservation.ref.run,
            "tenant": reservation.tenant,
            "period": reservation.period,
            "reservedTokens": reservation.tokens,
            "baseTokens": reservation.base_tokens,
            "createdAt": to_iso(reservation.created_at),
            "heldUntil": to_iso(reservation.held_until),
            r.BUDGET_CHECK_PARTITION: reservation_shard(reservation.ref.job_id),
            r.BUDGET_CHECK_SORT: to_iso(reservation.check_at),
            r.TTL_ATTRIBUTE: epoch_seconds(reservation.created_at + _KEEP),
        }
    )


def reservation_from_item(item: dict[str, Any]) -> Reservation:
    """A reservation item as the domain's record."""
    values = deserialize(item)
    return Reservation(
        ref=ReservationRef(values["jobId"], values["run"]),
        tenant=values["tenant"],
        period=values["period"],
        tokens=values["reservedTokens"],
        base_tokens=values.get("baseTokens", 0),
        created_at=from_iso(values["createdAt"]),
        held_until=from_iso(values["heldUntil"]),
        # A closed reservation has left the index: it is never due again.
        check_at=from_iso(values.get(r.BUDGET_CHECK_SORT, values["createdAt"])),
    )


def _reasons(error: ClientError) -> list[str]:
    reasons: list[dict[str, Any]] = error.response.get("CancellationReasons", [])  # type: ignore[assignment]
    return [str(reason.get("Code", "None")) for reason in reasons]


class DynamoBudgetLedger:
    """The budgets table through an injected low-level client (AWS, moto and local mode alike)."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    # --- BudgetLedger ------------------------------------------------------------------------

    def state(self, tenant: str, period: str) -> BudgetState:
        """The limit item, the period's counter and the running cap in one BatchGetItem (eventually
        consistent: a limit an operator just set applies within a second)."""
        found: dict[str, dict[str, Any]] = {}
        keys = [limit_key(tenant), counter_key(tenant, period), running_key(tenant)]
        request: Any = {self._table: {"Keys": keys}}
        while request:
            with storage_errors():
                response = self._client.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(self._table, []):
                values = deserialize(item)
                found[str(values[r.BUDGETS_SORT_KEY])] = values
            request = response.get("UnprocessedKeys") or None
        limit = found.get("LIMIT")
        counter = found.get(f"PERIOD#{period}", {})
        running = found.get(RUNNING_SORT_KEY)
        return BudgetState(
            tenant=tenant,
            period=period,
            configured_limit=int(limit["monthlyTokens"]) if limit is not None else None,
            used=int(counter.get("usedTokens", 0)),
            reserved=int(counter.get("reservedTokens", 0)),
            configured_max_running=int(running[MAX_RUNNING]) if running is not None else None,
        )

    def reserve(self, reservation: Reservation, limit: int) -> ReserveResult:
        """The reservation (unless it exists) and the counter (unless the tokens do not fit), together."""
        if reservation.tokens > limit:
            return ReserveResult(ReserveOutcome.EXCEEDED)
        counter_ttl = epoch_seconds(period_end(reservation.period) + _KEEP)
        items: list[Any] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": reservation_to_item(reservation),
                    "ConditionExpression": "attribute_not_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": r.BUDGETS_PARTITION_KEY},
                    # An earlier attempt's reservation comes back in the same call: the retry
                    # holds what was reserved, not what this code would reserve.
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": counter_key(reservation.tenant, reservation.period),
                    "UpdateExpression": (
                        "SET #reserved = if_not_exists(#reserved, :zero) + :tokens, "
                        "#committed = if_not_exists(#committed, :zero) + :tokens, "
                        "#used = if_not_exists(#used, :zero), #ttl = if_not_exists(#ttl, :ttl)"
                    ),
                    # used + reserved + tokens <= limit, as committed <= limit - tokens.
                    "ConditionExpression": "attribute_not_exists(#committed) OR #committed <= :ceiling",
                    "ExpressionAttributeNames": {k: v for k, v in _NAMES.items() if k != "#pk"},
                    "ExpressionAttributeValues": serialize(
                        {
                            ":zero": 0,
                            ":tokens": reservation.tokens,
                            ":ceiling": limit - reservation.tokens,
                            ":ttl": counter_ttl,
                        }
                    ),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ]
        failed = self._transact(items)
        if failed is None:
            return ReserveResult(ReserveOutcome.RESERVED)
        codes, error = failed
        reasons: list[dict[str, Any]] = error.response.get("CancellationReasons", [])  # type: ignore[assignment]
        if codes[0] == _CONDITION_FAILED:
            stored = reasons[0].get("Item")
            if not stored:  # pragma: no cover - DynamoDB returns ALL_OLD on a failed condition
                raise StorageUnavailableError("The stored reservation is not readable right now.") from error
            return ReserveResult(ReserveOutcome.ALREADY_RESERVED, stored=reservation_from_item(stored))
        if codes[1] == _CONDITION_FAILED:
            old = deserialize(reasons[1].get("Item") or {})
            return ReserveResult(ReserveOutcome.EXCEEDED, committed=int(old.get("committedTokens", 0)))
        raise error  # pragma: no cover - a cancellation that is neither condition: a bug

    def settle(self, settlement: Settlement) -> bool:
        """Close the reservation (while it is open, for these tokens) and move its tokens to used."""
        return self._close(
            settlement.ref,
            settlement.tenant,
            settlement.period,
            settlement.reserved_tokens,
            settlement.used_tokens,
        )

    def settle_late(self, late: LateUsage) -> bool:
        """Put the (job, batch) marker while it does not exist, and add the tokens to used."""
        marker = {
            r.BUDGETS_PARTITION_KEY: f"LATE#{late.job_id}",
            r.BUDGETS_SORT_KEY: f"BATCH#{late.batch_id}",
            "tenant": late.tenant,
            "period": late.period,
            _SETTLED: late.tokens,
            # Kept as long as the period's counter is (the counter's own TTL is its period's end
            # plus _KEEP; the marker is written within the period or just after).
            r.TTL_ATTRIBUTE: epoch_seconds(period_end(late.period) + _KEEP),
        }
        items: list[Any] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": serialize(marker),
                    "ConditionExpression": "attribute_not_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": r.BUDGETS_PARTITION_KEY},
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": counter_key(late.tenant, late.period),
                    "UpdateExpression": "ADD #used :used, #committed :used",
                    "ExpressionAttributeNames": {"#used": "usedTokens", "#committed": "committedTokens"},
                    "ExpressionAttributeValues": serialize({":used": late.tokens}),
                }
            },
        ]
        failed = self._transact(items)
        if failed is None:
            return True
        codes, error = failed
        if codes[0] == _CONDITION_FAILED:
            return False  # counted already: the marker exists
        raise error  # pragma: no cover - a cancellation that is not the condition: a bug

    def release(self, reservation: Reservation) -> bool:
        """Close the reservation, counting nothing used, and give all its tokens back."""
        return self._close(reservation.ref, reservation.tenant, reservation.period, reservation.tokens, 0)

    def due(self, shard: str, due_by: datetime, limit: int) -> list[Reservation]:
        """One Query on the sparse index: only open reservations carry its keys."""
        items = query_due(
            self._client,
            table=self._table,
            index=r.BUDGET_CHECK_INDEX,
            partition=r.BUDGET_CHECK_PARTITION,
            sort=r.BUDGET_CHECK_SORT,
            shard=shard,
            due_by=due_by,
            limit=limit,
        )
        return [reservation_from_item(item) for item in items]

    def defer(self, reservation: Reservation, check_at: datetime) -> None:
        """Move the reservation's check time, if it is still open."""
        try:
            with storage_errors():
                self._client.update_item(
                    TableName=self._table,
                    Key=reservation_key(reservation.ref),
                    UpdateExpression="SET #at = :at",
                    ConditionExpression="attribute_exists(#open)",
                    ExpressionAttributeNames={"#open": _OPEN, "#at": r.BUDGET_CHECK_SORT},
                    ExpressionAttributeValues=serialize({":at": to_iso(check_at)}),
                )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise

    def open_reservations(self, refs: Collection[ReservationRef]) -> set[ReservationRef]:
        """BatchGetItem of their keys (keys and the open marker only, eventually consistent)."""
        wanted = list(dict.fromkeys(refs))
        found: set[ReservationRef] = set()
        for start in range(0, len(wanted), _BATCH_GET_LIMIT):
            keys = [reservation_key(ref) for ref in wanted[start : start + _BATCH_GET_LIMIT]]
            request: Any = {
                self._table: {
                    "Keys": keys,
                    "ProjectionExpression": "#pk, #sk, #open",
                    "ExpressionAttributeNames": {
                        "#pk": r.BUDGETS_PARTITION_KEY,
                        "#sk": r.BUDGETS_SORT_KEY,
                        "#open": _OPEN,
                    },
                }
            }
            while request:
                with storage_errors():
                    response = self._client.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    values = deserialize(item)
                    if _OPEN not in values:
                        continue  # closed: settled or released
                    job_id = str(values[r.BUDGETS_PARTITION_KEY]).removeprefix("RESERVATION#")
                    found.add(
                        ReservationRef(job_id, int(str(values[r.BUDGETS_SORT_KEY]).removeprefix("RUN#")))
                    )
                request = response.get("UnprocessedKeys") or None
        return found

    def settled_runs(self, job_id: str) -> dict[int, int]:
        """One strongly consistent Query of the job's reservations: the closed ones' settledTokens."""
        return {
            int(values["run"]): int(values.get(_SETTLED, 0))
            for values in self._partition(f"RESERVATION#{job_id}")
            if _OPEN not in values
        }

    def late_counted(self, job_id: str) -> dict[str, int]:
        """The late usage counted for a job, by provider batch (one strongly consistent Query)."""
        return {
            str(values[r.BUDGETS_SORT_KEY]).removeprefix("BATCH#"): int(values[_SETTLED])
            for values in self._partition(f"LATE#{job_id}")
        }

    def _partition(self, pk: str) -> Iterator[dict[str, Any]]:
        """Every item of one partition key, deserialized, page by page."""
        arguments: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": r.BUDGETS_PARTITION_KEY},
            "ExpressionAttributeValues": serialize({":pk": pk}),
            "ConsistentRead": True,
        }
        while True:
            with storage_errors():
                page = self._client.query(**arguments)
            yield from (deserialize(item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # --- operators (outlast ops budgets set | show) ----------------------------------------------

    def set_limit(self, tenant: str, monthly_tokens: int, now: datetime) -> None:
        """The tenant's own limit from now on (0: no limit, whatever the stage default)."""
        with storage_errors():
            self._client.put_item(
                TableName=self._table,
                Item=serialize(
                    {
                        **deserialize(limit_key(tenant)),
                        "monthlyTokens": monthly_tokens,
                        "updatedAt": to_iso(now),
                    }
                ),
            )

    def periods(self, tenant: str) -> list[BudgetState]:
        """Every period's counter of a tenant, oldest first (one Query of its partition)."""
        states: list[BudgetState] = []
        arguments: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :period)",
            "ExpressionAttributeNames": {"#pk": r.BUDGETS_PARTITION_KEY, "#sk": r.BUDGETS_SORT_KEY},
            "ExpressionAttributeValues": serialize({":pk": tenant_pk(tenant), ":period": "PERIOD#"}),
            "ConsistentRead": True,
        }
        while True:
            with storage_errors():
                page = self._client.query(**arguments)
            for item in page.get("Items", []):
                values = deserialize(item)
                states.append(
                    BudgetState(
                        tenant=tenant,
                        period=str(values[r.BUDGETS_SORT_KEY]).removeprefix("PERIOD#"),
                        configured_limit=None,
                        used=int(values.get("usedTokens", 0)),
                        reserved=int(values.get("reservedTokens", 0)),
                    )
                )
            if "LastEvaluatedKey" not in page:
                return states
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def clear_limit(self, tenant: str) -> None:
        """Drop the tenant's own limit: the stage default applies again."""
        with storage_errors():
            self._client.delete_item(TableName=self._table, Key=limit_key(tenant))

    def tenants(self) -> Iterator[str]:
        """Every tenant with a limit or a counter (a Scan of the table's tenant items: operators only)."""
        seen: set[str] = set()
        arguments: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "begins_with(#pk, :tenant)",
            "ProjectionExpression": "#pk",
            "ExpressionAttributeNames": {"#pk": r.BUDGETS_PARTITION_KEY},
            "ExpressionAttributeValues": serialize({":tenant": "TENANT#"}),
        }
        while True:
            with storage_errors():
                page = self._client.scan(**arguments)
            for item in page.get("Items", []):
                tenant = str(deserialize(item)[r.BUDGETS_PARTITION_KEY]).removeprefix("TENANT#")
                if tenant not in seen:
                    seen.add(tenant)
                    yield tenant
            if "LastEvaluatedKey" not in page:
                return
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # --- the transactions --------------------------------------------------------------------

    def _close(self, ref: ReservationRef, tenant: str, period: str, reserved: int, used: int) -> bool:
        items: list[Any] = [
            {
                # Closed, not deleted: it leaves the index and keeps what it counted.
                "Update": {
                    "TableName": self._table,
                    "Key": reservation_key(ref),
                    "UpdateExpression": "SET #settled = :used REMOVE #open, #at",
                    "ConditionExpression": "attribute_exists(#open) AND #tokens = :tokens",
                    "ExpressionAttributeNames": {
                        "#open": _OPEN,
                        "#at": r.BUDGET_CHECK_SORT,
                        "#settled": _SETTLED,
                        "#tokens": "reservedTokens",
                    },
                    "ExpressionAttributeValues": serialize({":tokens": reserved, ":used": used}),
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": counter_key(tenant, period),
                    "UpdateExpression": "ADD #reserved :released, #used :used, #committed :change",
                    "ExpressionAttributeNames": {
                        "#reserved": "reservedTokens",
                        "#used": "usedTokens",
                        "#committed": "committedTokens",
                    },
                    "ExpressionAttributeValues": serialize(
                        {":released": -reserved, ":used": used, ":change": used - reserved}
                    ),
                }
            },
        ]
        failed = self._transact(items)
        if failed is None:
            return True
        codes, error = failed
        if codes[0] == _CONDITION_FAILED:
            return False  # settled or released already: the open reservation was the marker
        raise error  # pragma: no cover - a cancellation that is not the condition: a bug

    def _transact(self, items: list[Any]) -> tuple[list[str], ClientError] | None:
        """Run the transaction; None when it went through, else the cancellation reasons by item.

        Conflicts with a concurrent transaction on the same item are retried with jittered
        backoff (each attempt is all-or-nothing), then reported as StorageUnavailableError.
        """
        for attempt in range(_CONFLICT_ATTEMPTS):
            try:
                with storage_errors():
                    self._client.transact_write_items(TransactItems=items)
            except ClientError as error:
                if error_code(error) != _CANCELED:
                    raise
                codes = _reasons(error)
                if _CONDITION_FAILED in codes:
                    return codes, error
                if "ValidationError" in codes:
                    raise  # a malformed request: a bug, not a busy table
                if _CONFLICT not in codes:
                    raise StorageUnavailableError("Storage is busy; retry shortly.") from error
                time.sleep(random.uniform(0, 0.02 * 2**attempt))  # noqa: S311 - jitter, not a secret
                continue
            return None
        raise StorageUnavailableError("Budget writes conflict; retry shortly.")
