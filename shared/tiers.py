"""The tiers a job's calls may run at, and which one its next call goes out at (DESIGN.md, "Cost
tiers"): pure, and free of pydantic, so the ports (and the relay that imports them) stay light."""

from datetime import datetime, timedelta
from enum import StrEnum


class Tier(StrEnum):
    """How the provider processes a job's calls, and so what its tokens cost."""

    STANDARD = "standard"
    FLEX = "flex"  # half price, slower, sometimes "resource unavailable": for work that can wait
    BATCH = "batch"  # accepted by the schema, refused as tier_unavailable until the batcher exists


def call_tier(job_tier: Tier, created_at: datetime, now: datetime, fallback_seconds: int) -> Tier:
    """flex while the job is younger than the fallback, standard from then on (and for standard)."""
    if job_tier is Tier.FLEX and now - created_at < timedelta(seconds=fallback_seconds):
        return Tier.FLEX
    return Tier.STANDARD
