"""The committed, dated price table (docs/prices.json) the benchmarks price their counts with."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from outlast.local.synth import PROJECT_ROOT

PRICES_PATH = PROJECT_ROOT / "docs" / "prices.json"


@dataclass(frozen=True)
class Price:
    """One list price: `usd` per `per` units."""

    key: str
    usd: float
    per: float
    unit: str
    source: str

    @property
    def each(self) -> float:
        """Dollars for one unit."""
        return self.usd / self.per


@dataclass(frozen=True)
class PriceTable:
    """Every price, with the date and region they were read for."""

    as_of: str
    region: str
    prices: dict[str, Price]

    def __getitem__(self, key: str) -> Price:
        return self.prices[key]

    def cost(self, key: str, quantity: float) -> float:
        """Dollars for `quantity` units of the priced thing."""
        return self.prices[key].each * quantity


def load_prices(path: Path = PRICES_PATH) -> PriceTable:
    """Read and check the price table; every entry needs a positive `per` and a named source."""
    document: dict[str, Any] = json.loads(path.read_text())
    prices = {}
    for key, entry in document["prices"].items():
        if float(entry["per"]) <= 0 or float(entry["usd"]) < 0 or not str(entry.get("source", "")).strip():
            raise ValueError(f"price {key!r} needs usd >= 0, per > 0 and a source")
        prices[key] = Price(
            key=key,
            usd=float(entry["usd"]),
            per=float(entry["per"]),
            unit=str(entry["unit"]),
            source=str(entry["source"]),
        )
    return PriceTable(as_of=str(document["asOf"]), region=str(document["region"]), prices=prices)
