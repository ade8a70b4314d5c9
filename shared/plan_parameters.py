"""What a job stores at submit so that every later plan of it is the same plan (shared.planner).

Its own module so that the job record, and every function that reads one, need not import the
planner (its regular expressions and the prompt templates) at cold start: only submit and the
worker plan.
"""

from pydantic import BaseModel, ConfigDict, Field

PLAN_VERSION = "plan-v2"
DEFAULT_CHUNK_TOKENS = 6_000
DEFAULT_STEP_OUTPUT_TOKENS = 800
# extract's steps answer with JSON objects under a schema (DESIGN.md, "Structured extraction"): a
# budget of their own, stored on an extract job as its `step_output_tokens`.
DEFAULT_EXTRACT_STEP_OUTPUT_TOKENS = 1_500


class PlanParameters(BaseModel):
    """What a job stores at submit, so that every later plan of it is the same plan."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    plan_version: str = PLAN_VERSION
    chunk_tokens: int = Field(default=DEFAULT_CHUNK_TOKENS, ge=1)
    step_output_tokens: int = Field(default=DEFAULT_STEP_OUTPUT_TOKENS, ge=1)
