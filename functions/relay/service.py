"""The relay use case: newly inserted job items -> one queue message each, sent in batches of 10."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared import resources as r
from shared.fairness import message_group
from shared.ids import normalize_job_id
from shared.observability import logger, metrics
from shared.ports import JobMessage, JobQueue
from shared.stream_records import StreamRecord, UnreadableRecordError


@dataclass(frozen=True)
class _Dispatch:
    sequence_number: str
    message: JobMessage


def _dispatches(records: Iterable[dict[str, Any]], trace_id: str) -> list[_Dispatch]:
    dispatches = []
    for raw in records:
        try:
            record = StreamRecord.parse(raw)
        except UnreadableRecordError:
            # Not a record we can read, so not a job we could dispatch; a real job it hid is
            # re-sent by the sweeper after the grace period. Retrying it would only block the shard.
            logger.error("unreadable stream record skipped")
            continue
        job_id = normalize_job_id(record.job_id or "")
        if record.event_name != "INSERT" or record.item_type != r.JOB_ITEM_TYPE or job_id is None:
            continue  # the event source filter already drops these; local replays may not
        # A job item always has its owner key; were it missing, the job still goes out (its group
        # then the hash of no tenant) rather than wait for the sweeper.
        message = JobMessage(job_id=job_id, trace_id=trace_id, group=message_group(record.tenant or ""))
        dispatches.append(_Dispatch(record.sequence_number, message))
    return dispatches


def relay_records(records: list[dict[str, Any]], queue: JobQueue, trace_id: str) -> dict[str, Any]:
    """Dispatch the batch (SendMessageBatch, 10 at a time); report only the records not accepted.

    Lambda resumes a stream from the lowest failed sequence number, so records after a failure
    are sent again: a duplicate message is harmless (the worker's claim is conditional).
    """
    dispatches = _dispatches(records, trace_id)
    rejected = set(queue.send_batch([d.message for d in dispatches]))
    failed = [d.sequence_number for d in dispatches if d.message in rejected]
    metrics.add_metric(name="JobsRelayed", unit="Count", value=len(dispatches) - len(failed))
    if failed:
        logger.warning("some dispatches failed; the stream retries them", extra={"failed": len(failed)})
        metrics.add_metric(name="RelayFailures", unit="Count", value=len(failed))
    logger.info("relayed", extra={"dispatched": len(dispatches) - len(failed), "failed": len(failed)})
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
