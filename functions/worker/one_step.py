"""The request of a one-step job's call: its operation's prompt template, the plan's cap, its schema.

Its own module because two paths build it the same way: the claim that calls the model itself
(functions.worker.service) and the batch hand-off that sends the call to the batcher
(functions.worker.tier_paths). A multi-step job's calls are functions.worker.steps.step_request.
"""

from __future__ import annotations

from functions.worker.structured import response_schema
from shared.job import JobInput, JobRecord
from shared.planner import StepPlan
from shared.ports import CompletionRequest
from shared.prompts import cache_key, template_for_version
from shared.tiers import Tier


def one_step_request(job: JobRecord, plan: StepPlan, job_input: JobInput, tier: Tier) -> CompletionRequest:
    """The one call of a one-step job, at `tier`."""
    template = template_for_version(job.operation, job.prompt_version)
    return CompletionRequest(
        model=job.model,
        messages=template.render(job_input.text, job_input.labels),
        # The plan's cap: the job's maxOutputTokens, or the most a caller may ask for.
        max_output_tokens=plan.steps[0].max_tokens,
        response_schema=response_schema(plan, plan.steps[0]),
        tier=tier,
        cache_key=cache_key(job.tenant, job.operation, job.prompt_version),
    )
