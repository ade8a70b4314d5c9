"""The price table as synth, the bench and operator tools read it (docs/model-prices.json)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from shared.prices import PriceTable

PRICE_TABLE_PATH = Path(__file__).resolve().parents[1] / "docs" / "model-prices.json"


@cache
def read_price_table(path: Path = PRICE_TABLE_PATH) -> PriceTable:
    """The table, validated (a malformed table fails synth, not a submit)."""
    return PriceTable.model_validate_json(path.read_text(encoding="utf-8"))
