"""outlast's command line, its typed Python client (`outlast.client.Client`) and, from a checkout
of the repository, local mode and the operator tools. Nothing here ships to Lambda."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("outlast")
except PackageNotFoundError:  # pragma: no cover - a checkout run without `make install`
    __version__ = "0.0.0+checkout"
