"""The price table (docs/model-prices.json) and what tokens cost under it: pure, no I/O.

Budgets stay in tokens (DESIGN.md, "Cost tiers"); dollars are for operators and the bench. The
table also says which model/tier pairs exist at all: a pair it does not price is refused at
submit, so no job runs at a price nobody wrote down.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from shared.tiers import Tier

PER_TOKENS = 1_000_000  # the table's prices are per million tokens


class _PriceModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)


class TierPrice(_PriceModel):
    """USD per million tokens of one model at one tier."""

    input: float = Field(ge=0)
    cached_input: float = Field(ge=0)
    output: float = Field(ge=0)

    def cost(self, input_tokens: int, cached_input_tokens: int, output_tokens: int) -> float:
        """Dollars for these tokens (cached input is part of input, billed at its own price)."""
        cached = min(cached_input_tokens, input_tokens)
        return (
            (input_tokens - cached) * self.input + cached * self.cached_input + output_tokens * self.output
        ) / PER_TOKENS


class PriceTable(_PriceModel):
    """Prices per model and tier, dated, with where they were read."""

    as_of: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    source: str = Field(min_length=1)
    currency: str = "USD"
    unit: str = "per 1,000,000 tokens"
    note: str | None = None
    models: dict[str, dict[Tier, TierPrice]]

    def price(self, model: str, tier: Tier) -> TierPrice | None:
        """The price of a pair, or None when the table does not offer it."""
        return self.models.get(model, {}).get(tier)

    def tiers_of(self, models: Iterable[str], allowed: Iterable[Tier]) -> dict[str, tuple[Tier, ...]]:
        """For each model, the tiers both priced here and allowed by the stage (in Tier order)."""
        allowed_tiers = set(allowed)
        return {
            model: tuple(
                tier for tier in Tier if tier in allowed_tiers and self.price(model, tier) is not None
            )
            for model in models
        }


@dataclass(frozen=True)
class CostRange:
    """What a job's tokens cost: exact when its calls ran at one tier, else between the cheapest and
    the dearest of the tiers it used (usage records the tiers, not each tier's share)."""

    low: float
    high: float

    @property
    def exact(self) -> bool:
        """True when there is one figure."""
        return self.low == self.high


def job_cost(
    table: PriceTable,
    model: str,
    *,
    tiers: Iterable[Tier],
    input_tokens: int,
    cached_input_tokens: int,
    output_tokens: int,
) -> CostRange | None:
    """The dollars of a job's usage at the tiers it ran at (standard when none is recorded); None
    when the table prices none of them."""
    used = set(tiers) or {Tier.STANDARD}
    costs = [
        price.cost(input_tokens, cached_input_tokens, output_tokens)
        for tier in used
        if (price := table.price(model, tier)) is not None
    ]
    if not costs:
        return None
    return CostRange(low=min(costs), high=max(costs))


def encode_model_tiers(tiers: Mapping[str, Iterable[Tier]]) -> str:
    """The MODEL_TIERS setting's text: `model=tier|tier;model=tier` (synth writes it)."""
    return ";".join(
        f"{model}={'|'.join(tier.value for tier in model_tiers)}" for model, model_tiers in tiers.items()
    )


def parse_model_tiers(text: str) -> dict[str, tuple[Tier, ...]]:
    """The inverse of `encode_model_tiers`; raises ValueError on a tier outside the enum."""
    parsed: dict[str, tuple[Tier, ...]] = {}
    for entry in text.split(";"):
        if not entry.strip():
            continue
        model, _, tiers = entry.partition("=")
        parsed[model.strip()] = tuple(Tier(tier.strip()) for tier in tiers.split("|") if tier.strip())
    return parsed
