"""DynamoDB capacity units computed from item images, by DynamoDB's documented rules.

moto answers ReturnConsumedCapacity with a constant (and nothing at all for UpdateItem), so
the benchmark records what moto says and computes the real units itself, from the item as it
was before and after each write. The rules, from the DynamoDB Developer Guide ("Item sizes and
capacity unit consumption", "Global secondary indexes: provisioned throughput considerations"):

- item size = the sum of the UTF-8 lengths of attribute names and the sizes of their values;
  numbers take 1 byte per two significant digits plus 1 byte; null and Boolean 1 byte; a list
  or map 3 bytes plus its elements;
- a write costs ceil(size / 1 KB) units of the larger of the before and after images (PutItem,
  UpdateItem) or of the deleted item (DeleteItem); a conditional write that fails still costs
  ceil(existing size / 1 KB), or 1 unit when the item does not exist;
- a strongly consistent read costs ceil(size / 4 KB) units, an eventually consistent one half;
  a read of a missing item still costs 1 (or 0.5); a Query sums the sizes of every item it
  reads (before any filter) and rounds the total up to 4 KB; index queries are eventually
  consistent;
- a write touches a global secondary index when the item is in the index before or after it:
  entering costs one index write, leaving one, a change of an index key two (delete + put),
  a change of projected attributes only one, nothing else none. An index entry holds the
  table's key, the index's key and the projected attributes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.adapters.item_size import Item, item_size, value_size

KB = 1024
READ_UNIT_BYTES = 4 * KB
WRITE_UNIT_BYTES = KB
# Index storage is billed with 100 bytes of overhead per entry; throughput is not (reported only).
INDEX_ENTRY_STORAGE_OVERHEAD = 100

__all__ = ["Item", "item_size", "value_size"]


def read_units(size_bytes: int, *, consistent: bool) -> float:
    """Read units for `size_bytes` read in one operation (a missing item reads as 0 bytes)."""
    units = max(1, math.ceil(size_bytes / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


def write_units(size_bytes: int) -> int:
    """Write units for an item (or index entry) of this size."""
    return max(1, math.ceil(size_bytes / WRITE_UNIT_BYTES))


@dataclass(frozen=True)
class IndexSpec:
    """A global secondary index: its key and what it projects."""

    name: str
    keys: tuple[str, ...]
    projection: str  # ALL | KEYS_ONLY | INCLUDE
    non_key_attributes: tuple[str, ...] = ()

    @classmethod
    def from_description(cls, index: Mapping[str, Any]) -> IndexSpec:
        """From DescribeTable's GlobalSecondaryIndexes entry."""
        projection = index.get("Projection", {})
        return cls(
            name=str(index["IndexName"]),
            keys=tuple(str(k["AttributeName"]) for k in index["KeySchema"]),
            projection=str(projection.get("ProjectionType", "ALL")),
            non_key_attributes=tuple(projection.get("NonKeyAttributes", [])),
        )

    def entry(self, item: Item | None, table_keys: tuple[str, ...]) -> dict[str, Any] | None:
        """The index entry for `item`, or None when the item is not in this (sparse) index."""
        if item is None or any(key not in item for key in self.keys):
            return None
        if self.projection == "ALL":
            return dict(item)
        wanted = set(table_keys) | set(self.keys)
        if self.projection == "INCLUDE":
            wanted |= set(self.non_key_attributes)
        return {name: value for name, value in item.items() if name in wanted}


@dataclass(frozen=True)
class TableSpec:
    """A table's key and its global secondary indexes."""

    name: str
    keys: tuple[str, ...]
    indexes: tuple[IndexSpec, ...] = ()

    @classmethod
    def from_description(cls, table: Mapping[str, Any]) -> TableSpec:
        """From DescribeTable's Table."""
        return cls(
            name=str(table["TableName"]),
            keys=tuple(str(k["AttributeName"]) for k in table["KeySchema"]),
            indexes=tuple(IndexSpec.from_description(i) for i in table.get("GlobalSecondaryIndexes", [])),
        )

    def key_of(self, item: Item) -> dict[str, Any]:
        """The primary key of an item."""
        return {name: item[name] for name in self.keys}

    def index(self, name: str) -> IndexSpec:
        """An index by name."""
        for index in self.indexes:
            if index.name == name:
                return index
        raise KeyError(name)


@dataclass
class IndexWrite:
    """What one table write did to one index."""

    index: str
    operations: list[str] = field(default_factory=list)  # "put" / "delete" / "update"
    units: int = 0
    entry_bytes: int = 0


@dataclass
class WriteCost:
    """The units one write consumed: the table's and each index's."""

    table_units: int
    item_bytes: int
    index_writes: list[IndexWrite] = field(default_factory=list)

    @property
    def index_units(self) -> int:
        """Units over every index."""
        return sum(write.units for write in self.index_writes)


def _index_write(spec: IndexSpec, before: Item | None, after: Item | None, table: TableSpec) -> IndexWrite:
    old, new = spec.entry(before, table.keys), spec.entry(after, table.keys)
    write = IndexWrite(index=spec.name)
    if old is None and new is None:
        return write
    if old is None and new is not None:
        write.operations, write.entry_bytes = ["put"], item_size(new)
        write.units = write_units(write.entry_bytes)
    elif new is None and old is not None:
        write.operations, write.entry_bytes = ["delete"], item_size(old)
        write.units = write_units(write.entry_bytes)
    elif old is not None and new is not None:
        if any(old.get(key) != new.get(key) for key in spec.keys):
            write.operations = ["delete", "put"]
            write.entry_bytes = item_size(new)
            write.units = write_units(item_size(old)) + write_units(item_size(new))
        elif old != new:
            # Writing the same value again is not a change (an assumption: AWS does not say).
            write.operations, write.entry_bytes = ["update"], max(item_size(old), item_size(new))
            write.units = write_units(write.entry_bytes)
    return write


def write_cost(table: TableSpec, before: Item | None, after: Item | None, *, succeeded: bool) -> WriteCost:
    """Units of one PutItem, UpdateItem or DeleteItem, from the item before and after it.

    `after` is None for a delete. A failed conditional write writes nothing but still costs
    the existing item's size (or 1 unit when there is none).
    """
    before_size = item_size(before) if before else 0
    if not succeeded:
        return WriteCost(table_units=write_units(before_size), item_bytes=before_size)
    after_size = item_size(after) if after else 0
    cost = WriteCost(
        table_units=write_units(max(before_size, after_size)), item_bytes=max(before_size, after_size)
    )
    for spec in table.indexes:
        index_write = _index_write(spec, before, after, table)
        if index_write.operations:
            cost.index_writes.append(index_write)
    return cost


def query_units(entries: Sequence[Item], *, consistent: bool) -> tuple[float, int]:
    """Read units of a Query (or Scan) that read these items or index entries, and their bytes."""
    total = sum(item_size(entry) for entry in entries)
    return read_units(total, consistent=consistent), total
