"""options.tier at submit (DESIGN.md, "Cost tiers"): validated, out of the fingerprint at its
default, and refused as tier_unavailable for a pair the price table or the stage does not offer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from functions.submit.dependencies import SubmitDependencies
from functions.submit.service import submit_job
from shared.contract import SubmitRequest
from shared.errors import TierUnavailableError
from shared.idempotency import fingerprint
from shared.problems import PROBLEMS
from shared.tiers import Tier
from tests.budget_fakes import InMemoryBudgetLedger
from tests.document_fakes import InMemoryDocumentObjects, InMemoryDocumentRepository
from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore
from tests.unit.test_submit_service import ALICE, SUMMARIZE, settings

TIERS = "gpt-4o-mini=standard;gpt-5-mini=standard|flex;gpt-5-nano=standard|flex|batch"


def parse(body: dict[str, Any]) -> SubmitRequest:
    return SubmitRequest.model_validate(json.loads(json.dumps(body)))


def with_options(**options: Any) -> dict[str, Any]:
    return {**SUMMARIZE, "options": options}


def deps_with(
    repository: InMemoryJobRepository, payloads: InMemoryPayloadStore, clock: FakeClock, **env: str
) -> SubmitDependencies:
    """The submit's dependencies over the given fakes, under settings with `env`."""
    return SubmitDependencies(
        settings=settings(**env),
        repository=repository,
        payloads=payloads,
        clock=clock,
        budgets=InMemoryBudgetLedger(),
        documents=InMemoryDocumentRepository(),
        document_objects=InMemoryDocumentObjects(),
    )


@pytest.fixture
def deps(
    repository: InMemoryJobRepository, payloads: InMemoryPayloadStore, clock: FakeClock
) -> SubmitDependencies:
    return deps_with(
        repository, payloads, clock, ALLOWED_MODELS="gpt-4o-mini,gpt-5-mini,gpt-5-nano", MODEL_TIERS=TIERS
    )


class TestTheOption:
    def test_a_job_without_a_tier_is_standard(self) -> None:
        assert parse(SUMMARIZE).tier is Tier.STANDARD

    @pytest.mark.parametrize("tier", ["standard", "flex", "batch"])
    def test_each_tier_of_the_contract_parses(self, tier: str) -> None:
        assert parse(with_options(tier=tier)).tier is Tier(tier)

    @pytest.mark.parametrize("tier", ["Flex", "priority", "", 1])
    def test_anything_else_is_refused(self, tier: Any) -> None:
        with pytest.raises(ValidationError):
            parse(with_options(tier=tier))

    def test_standard_spelled_out_keeps_the_fingerprint_of_no_tier(self) -> None:
        # A retry that spells the default out still replays (DESIGN.md, "Idempotency").
        assert fingerprint(parse(with_options(tier="standard")).client_fields()) == fingerprint(
            parse(SUMMARIZE).client_fields()
        )

    def test_flex_is_another_request(self) -> None:
        assert fingerprint(parse(with_options(tier="flex")).client_fields()) != fingerprint(
            parse(SUMMARIZE).client_fields()
        )

    def test_other_options_beside_standard_stay_in_the_fingerprint(self) -> None:
        assert parse(with_options(tier="standard", maxOutputTokens=5)).client_fields()["options"] == {
            "maxOutputTokens": 5
        }


class TestAtSubmit:
    def test_a_priced_flex_pair_is_recorded_on_the_job(self, deps: SubmitDependencies) -> None:
        job = submit_job(deps, ALICE, parse(with_options(model="gpt-5-mini", tier="flex")), "k").job

        assert job.tier is Tier.FLEX

    def test_a_model_the_table_prices_at_standard_only_is_refused_at_flex(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository
    ) -> None:
        with pytest.raises(TierUnavailableError) as refused:
            submit_job(deps, ALICE, parse(with_options(tier="flex")), "k")

        assert "gpt-4o-mini" in str(refused.value)
        assert repository.writes == []

    def test_batch_is_accepted_where_priced_and_refused_where_not(self, deps: SubmitDependencies) -> None:
        job = submit_job(deps, ALICE, parse(with_options(model="gpt-5-nano", tier="batch")), "k").job
        assert job.tier is Tier.BATCH
        with pytest.raises(TierUnavailableError):
            submit_job(deps, ALICE, parse(with_options(model="gpt-5-mini", tier="batch")), "k2")

    def test_a_stage_without_a_tier_table_runs_standard_only(
        self, repository: InMemoryJobRepository, payloads: InMemoryPayloadStore, clock: FakeClock
    ) -> None:
        deps = deps_with(repository, payloads, clock)
        assert submit_job(deps, ALICE, parse(SUMMARIZE), "k").job.tier is Tier.STANDARD
        with pytest.raises(TierUnavailableError):
            submit_job(deps, ALICE, parse(with_options(tier="flex")), "k2")

    def test_an_identical_retry_replays_after_a_deploy_took_the_tier_away(
        self,
        deps: SubmitDependencies,
        repository: InMemoryJobRepository,
        payloads: InMemoryPayloadStore,
        clock: FakeClock,
    ) -> None:
        body = with_options(model="gpt-5-mini", tier="flex")
        first = submit_job(deps, ALICE, parse(body), "k").job
        narrowed = deps_with(
            repository,
            payloads,
            clock,
            ALLOWED_MODELS="gpt-4o-mini,gpt-5-mini",
            MODEL_TIERS="gpt-5-mini=standard",
        )

        again = submit_job(narrowed, ALICE, parse(body), "k")

        assert again.replayed
        assert again.job.job_id == first.job_id
        with pytest.raises(TierUnavailableError):
            submit_job(narrowed, ALICE, parse(body), "k-new")

    def test_the_refusal_is_a_400_problem(self) -> None:
        assert PROBLEMS[TierUnavailableError.code].status == 400


def test_settings_with_a_tier_table_stay_hashable() -> None:
    # The composition root is cached by its settings: an unhashable field breaks every cold start.
    assert hash(settings(MODEL_TIERS=TIERS)) is not None
