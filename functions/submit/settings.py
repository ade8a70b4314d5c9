"""Settings of the submit function."""

from typing import Annotated

from pydantic import BeforeValidator, Field

from shared import resources as r
from shared.contract import Operation
from shared.plan_parameters import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_EXTRACT_STEP_OUTPUT_TOKENS,
    DEFAULT_STEP_OUTPUT_TOKENS,
    PLAN_VERSION,
    PlanParameters,
)
from shared.prices import parse_model_tiers
from shared.settings import BudgetPolicySettings, JobPolicySettings, StorageSettings
from shared.tiers import Tier


def _model_tiers(value: object) -> object:
    # Pairs, not a dict: settings are hashable (the composition root is cached by them).
    return tuple(parse_model_tiers(value).items()) if isinstance(value, str) else value


class SubmitSettings(StorageSettings, JobPolicySettings, BudgetPolicySettings):
    """Where to write and the policy applied to new jobs (their budget reservation too)."""

    # Jobs on documents read the caller's document and its text, and pin it.
    documents_table: str = Field(alias=r.ENV_DOCUMENTS_TABLE, min_length=1)
    documents_bucket: str = Field(alias=r.ENV_DOCUMENTS_BUCKET, min_length=1)
    submits_per_minute: int = Field(default=60, alias="SUBMITS_PER_MINUTE", ge=1, le=100_000)
    # The running cap of tenants without their own (DESIGN.md, "Fairness between tenants"; 0: none).
    default_max_running_per_tenant: int = Field(default=0, alias="DEFAULT_MAX_RUNNING_PER_TENANT", ge=0)
    # How long inputs are split into steps (shared.planner); stored on each job at submit.
    plan_version: str = Field(default=PLAN_VERSION, alias="PLAN_VERSION", min_length=1)
    chunk_tokens: int = Field(default=DEFAULT_CHUNK_TOKENS, alias="CHUNK_TOKENS", ge=1)
    step_output_tokens: int = Field(default=DEFAULT_STEP_OUTPUT_TOKENS, alias="STEP_OUTPUT_TOKENS", ge=1)
    extract_step_output_tokens: int = Field(
        default=DEFAULT_EXTRACT_STEP_OUTPUT_TOKENS, alias="EXTRACT_STEP_OUTPUT_TOKENS", ge=1
    )

    # The tiers each allowed model may run at: priced in docs/model-prices.json and allowed by the
    # stage (synth writes it). Unset: standard only, for every model.
    model_tiers: Annotated[tuple[tuple[str, tuple[Tier, ...]], ...] | None, BeforeValidator(_model_tiers)] = (
        Field(default=None, alias="MODEL_TIERS")
    )

    def tiers_for(self, model: str) -> tuple[Tier, ...]:
        """The tiers a job of this model may ask for."""
        if self.model_tiers is None:
            return (Tier.STANDARD,)
        return dict(self.model_tiers).get(model, ())

    def plan_for(self, operation: Operation) -> PlanParameters:
        """The plan parameters new jobs of an operation are planned (and forever after replanned)
        with: extract's steps have their own output budget, stored as the job's stepOutputTokens."""
        return PlanParameters(
            plan_version=self.plan_version,
            chunk_tokens=self.chunk_tokens,
            step_output_tokens=(
                self.extract_step_output_tokens if operation is Operation.EXTRACT else self.step_output_tokens
            ),
        )
