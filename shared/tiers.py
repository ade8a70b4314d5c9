"""The tiers a job's calls may run at, and which one its next call goes out at (DESIGN.md, "Cost
tiers"): pure, and free of pydantic, so the ports (and the relay that imports them) stay light."""

from datetime import datetime, timedelta
from enum import StrEnum


class Tier(StrEnum):
    """How the provider processes a job's calls, and so what its tokens cost."""

    STANDARD = "standard"
    FLEX = "flex"  # half price, slower, sometimes "resource unavailable": for work that can wait
    BATCH = "batch"  # the provider's Batch API: half price, answered within 24 hours (the batcher)


def call_tier(
    job_tier: Tier,
    created_at: datetime,
    now: datetime,
    fallback_seconds: int,
    *,
    batch_fallback: bool = False,
) -> Tier:
    """flex while the job is younger than the fallback, standard from then on (and for standard).

    A batch job's calls go to the batcher (Tier.BATCH) until a batch of it expired or failed
    (`batch_fallback`): from then on they run as a flex job's do, flex and then standard."""
    if job_tier is Tier.BATCH and not batch_fallback:
        return Tier.BATCH
    flexible = job_tier in (Tier.FLEX, Tier.BATCH)
    if flexible and now - created_at < timedelta(seconds=fallback_seconds):
        return Tier.FLEX
    return Tier.STANDARD
