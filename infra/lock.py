"""`make lock`: resolve the lock files under requirements/ with uv, every distribution's hash pinned.

- `dev.txt`: the project with its dev extra (local mode, the tests, CI, the CDK app), resolved
  universally (any OS and machine) for the runtime's Python and newer. `make install` installs it
  into .venv with `pip --require-hashes`.
- `layer-<name>.txt`, one per layer (infra.packaging.LAYERS): the layer's direct dependencies,
  as pyproject.toml's `functions` extra spells them, resolved for the Lambda platform
  (aarch64 manylinux2014, the runtime's Python) with dev.txt as constraints, so the functions in
  AWS import the versions the tests ran; without what the runtime provides (boto3 and its
  closure). `make layers` installs it with `pip --require-hashes --no-deps`.

Existing pins are kept while pyproject.toml still admits them; `--upgrade` moves every pin to the
newest release the ranges allow. Needs PyPI.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from infra.packaging import (
    DEV_LOCK,
    LAYERS,
    LOCK_DIR,
    LOCK_PLATFORM,
    PROJECT_ROOT,
    PYTHON_VERSION,
    RUNTIME_PROVIDED,
    LayerSpec,
    project_dependencies,
    requirements_for,
)

# What the files' headers say regenerates them (instead of uv's command line with local paths).
COMPILE_COMMAND = "make lock"


def _uv_compile(root: Path, arguments: list[str], stdin: str | None = None) -> None:
    # Run from the project root with relative paths: the files' annotations name no local path.
    command = [
        sys.executable, "-m", "uv", "pip", "compile", "--quiet", "--generate-hashes",
        "--python-version", PYTHON_VERSION, "--custom-compile-command", COMPILE_COMMAND, *arguments,
    ]  # fmt: skip
    subprocess.run(command, cwd=root, input=stdin, text=True, check=True)  # noqa: S603 - our arguments


def lock_dev(root: Path = PROJECT_ROOT, *, upgrade: bool = False) -> Path:
    """requirements/dev.txt: `.[dev]` for every platform."""
    output = Path(LOCK_DIR) / DEV_LOCK
    _uv_compile(
        root,
        ["pyproject.toml", "--extra", "dev", "--universal", "--output-file", str(output)]
        + (["--upgrade"] if upgrade else []),
    )
    return root / output


def lock_layer(spec: LayerSpec, root: Path = PROJECT_ROOT) -> Path:
    """requirements/layer-<name>.txt: the layer's set for the Lambda platform, at dev.txt's pins."""
    requirements = requirements_for(spec, project_dependencies(root / "pyproject.toml"))
    output = Path(LOCK_DIR) / spec.lock_name
    excluded = [argument for name in sorted(RUNTIME_PROVIDED) for argument in ("--no-emit-package", name)]
    arguments = [
        "-",
        "--constraints", str(Path(LOCK_DIR) / DEV_LOCK),
        "--python-platform", LOCK_PLATFORM,
        "--output-file", str(output),
        *excluded,
    ]  # fmt: skip
    _uv_compile(root, arguments, stdin="".join(f"{requirement}\n" for requirement in requirements))
    return root / output


def main(argv: list[str] | None = None) -> int:
    """Regenerate every lock file: dev first, then each layer constrained to it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--upgrade", action="store_true", help="newest releases the ranges allow")
    args = parser.parse_args(argv)
    written = [lock_dev(upgrade=args.upgrade), *(lock_layer(spec) for spec in LAYERS)]
    for path in written:
        sys.stdout.write(f"locked {path.relative_to(PROJECT_ROOT)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
