"""Lambda packaging without Docker: the project's code as one asset, third-party packages in layers.

- Code asset: `shared/` and `functions/` copied into `build/assets/code-<hash>` (no tests, no caches).
  Every function uses it with its own handler string; its hash changes only with the code.
- Layers, one per dependency set, selected by name from pyproject.toml's [project].dependencies
  (the ranges are never respelled here): the API layer (submit, status, relay, sweeper) has no
  openai; the worker layer is the same plus openai. Built with pip for the Lambda platform
  (`--platform manylinux2014_aarch64 --implementation cp --python-version <runtime>
  --only-binary=:all:`), cached under `build/layers/<name>-<key>` where the key hashes the
  requirements, the runtime and this recipe; a cached layer is reused offline.
- boto3 comes from the Lambda runtime, not the layers: every Python runtime ships boto3 and
  botocore, which AWS patches; the calls the functions make (DynamoDB, S3, SQS, Secrets Manager)
  are long established; and botocore alone is about 25 MB unzipped that every cold start of every
  function would otherwise unpack. pip still pulls botocore in (aws-xray-sdk needs it), so the
  runtime-provided distributions are pruned from the layers after the install.
- `bundle=false` (tests, local mode) uses a placeholder layer directory: no pip, no network.
  Local mode runs the code with the host's virtual environment standing in for the layers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = PROJECT_ROOT / "pyproject.toml"
BUILD_DIR = PROJECT_ROOT / "build"
CODE_PACKAGES = ("shared", "functions")

# The Lambda runtime the layers are built for; function_factory checks its Runtime matches.
PYTHON_VERSION = "3.14"
PLATFORM = "manylinux2014_aarch64"
# Bump when the recipe below changes, so cached layers are rebuilt.
RECIPE_VERSION = "1"
# What the Lambda Python runtime provides: boto3 and its dependency closure.
RUNTIME_PROVIDED = frozenset(
    {"boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3"}
)

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_SKIPPED_DIRECTORIES = frozenset({"__pycache__", "tests"})
_SKIPPED_SUFFIXES = frozenset({".pyc", ".pyo"})
_PLACEHOLDER_TEXT = (
    "Placeholder layer: synthesized without dependency bundling (bundle=false or auto without a\n"
    "cached layer). Not deployable; `make deploy` builds the real layers.\n"
)


class LayerBuildError(RuntimeError):
    """pip could not build a layer (most often: no network and no cached layer)."""


@dataclass(frozen=True)
class LayerSpec:
    """A dependency set: the distributions (by name) that one layer carries."""

    name: str
    packages: tuple[str, ...]
    description: str


API_LAYER = LayerSpec(
    "api",
    ("aws-lambda-powertools", "pydantic"),
    "outlast dependencies without the model SDK (submit, status, relay, sweeper)",
)
WORKER_LAYER = LayerSpec(
    "worker",
    (*API_LAYER.packages, "openai"),
    "outlast dependencies with the model SDK (worker)",
)
LAYERS = (API_LAYER, WORKER_LAYER)


def code_files(root: Path) -> list[Path]:
    """The files of the code asset, relative to `root`: the packages without tests, caches, dotfiles."""
    files = []
    for package in CODE_PACKAGES:
        for path in sorted((root / package).rglob("*")):
            relative = path.relative_to(root)
            skipped = any(part in _SKIPPED_DIRECTORIES or part.startswith(".") for part in relative.parts)
            if path.is_file() and not skipped and path.suffix not in _SKIPPED_SUFFIXES:
                files.append(relative)
    return files


def normalize(name: str) -> str:
    """PEP 503 normalized distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_name(requirement: str) -> str:
    """The normalized name a PEP 508 requirement string starts with."""
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return normalize(match.group(1))


def project_dependencies(pyproject: Path = PYPROJECT) -> tuple[str, ...]:
    """[project].dependencies of pyproject.toml, as written there."""
    with pyproject.open("rb") as handle:
        return tuple(tomllib.load(handle)["project"]["dependencies"])


def requirements_for(spec: LayerSpec, dependencies: Iterable[str]) -> tuple[str, ...]:
    """The requirement strings of `dependencies` whose names are in the spec, in pyproject order."""
    wanted = {normalize(name) for name in spec.packages}
    selected = tuple(d for d in dependencies if distribution_name(d) in wanted)
    missing = wanted - {distribution_name(d) for d in selected}
    if missing:
        raise ValueError(f"layer {spec.name}: not in pyproject dependencies: {sorted(missing)}")
    return selected


def layer_key(requirements: Iterable[str], python_version: str = PYTHON_VERSION) -> str:
    """A short hash of everything that decides a layer's content."""
    recipe = {
        "requirements": sorted(requirements),
        "python": python_version,
        "platform": PLATFORM,
        "pruned": sorted(RUNTIME_PROVIDED),
        "recipe": RECIPE_VERSION,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class LayerAsset:
    """A directory to use as a layer's asset, and the hash CDK should use for it."""

    path: Path
    asset_hash: str
    placeholder: bool


class Packaging:
    """Produces the code asset and the layer directories under one build directory."""

    def __init__(self, build_dir: Path = BUILD_DIR, pyproject: Path = PYPROJECT) -> None:
        self._build_dir = build_dir
        self._pyproject = pyproject

    def requirements(self, spec: LayerSpec) -> tuple[str, ...]:
        """The layer's requirement strings, from pyproject.toml."""
        return requirements_for(spec, project_dependencies(self._pyproject))

    def cached_layer(self, spec: LayerSpec) -> LayerAsset:
        """The layer's cache entry (it may not exist yet)."""
        key = layer_key(self.requirements(spec))
        return LayerAsset(self._build_dir / "layers" / f"{spec.name}-{key}", f"{spec.name}-{key}", False)

    def layer(self, spec: LayerSpec, *, build: bool, allow_placeholder: bool) -> LayerAsset:
        """The cached layer; else a fresh build (`build`); else a placeholder (`allow_placeholder`)."""
        cached = self.cached_layer(spec)
        if cached.path.is_dir():
            return cached
        if build:
            self._build(self.requirements(spec), cached.path)
            return cached
        if allow_placeholder:
            return self.placeholder()
        raise LayerBuildError(f"layer {spec.name} is not built; run `make layers`")

    def placeholder(self) -> LayerAsset:
        """An (almost) empty layer directory: synth needs no pip and no network."""
        path = self._build_dir / "layers" / "placeholder"
        marker = path / "python" / "PLACEHOLDER.txt"
        if not marker.is_file() or marker.read_text() != _PLACEHOLDER_TEXT:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(_PLACEHOLDER_TEXT)
        digest = hashlib.sha256(_PLACEHOLDER_TEXT.encode()).hexdigest()[:16]
        return LayerAsset(path, f"placeholder-{digest}", True)

    def stage_code(self) -> Path:
        """Copy the project's packages into `build/assets/code-<hash of their content>`.

        Content-addressed: an unchanged tree is reused as is, and two synths running at once
        (make synth, local mode, tests) never write into the same directory.
        """
        root = self._pyproject.parent
        files = code_files(root)
        digest = hashlib.sha256()
        for relative in files:
            digest.update(relative.as_posix().encode() + b"\0" + (root / relative).read_bytes() + b"\0")
        assets = self._build_dir / "assets"
        target = assets / f"code-{digest.hexdigest()[:16]}"
        if target.is_dir():
            return target
        assets.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".code-", dir=assets))
        for relative in files:
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / relative, staging / relative)
        try:
            staging.rename(target)
        except OSError:  # another synth staged the same content first
            shutil.rmtree(staging, ignore_errors=True)
        return target

    def _build(self, requirements: tuple[str, ...], target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        sys.stderr.write(f"building layer {target.name} for python{PYTHON_VERSION} {PLATFORM} with pip\n")
        command = [
            sys.executable, "-m", "pip", "install",
            "--quiet", "--disable-pip-version-check", "--no-compile",
            "--only-binary=:all:", "--platform", PLATFORM, "--implementation", "cp",
            "--python-version", PYTHON_VERSION,
            "--target", str(staging / "python"),
            *requirements,
        ]  # fmt: skip
        try:
            subprocess.run(command, check=True)  # noqa: S603 - our interpreter, our arguments
        except subprocess.CalledProcessError as error:
            shutil.rmtree(staging, ignore_errors=True)
            raise LayerBuildError(
                f"pip could not build {target.name} (no network?). Synthesize offline with "
                "`-c bundle=auto` (cached layers, else placeholders) or `-c bundle=false`."
            ) from error
        prune(staging / "python", RUNTIME_PROVIDED)
        if target.exists():  # another build won the race; its result is identical
            shutil.rmtree(staging, ignore_errors=True)
        else:
            staging.rename(target)


def prune(site: Path, distributions: Iterable[str]) -> list[str]:
    """Remove installed distributions (by their RECORD files) and console scripts from a target dir."""
    wanted = {normalize(d) for d in distributions}
    root = site.resolve()
    removed: list[str] = []
    emptied: set[Path] = set()
    for info in sorted(site.glob("*.dist-info")):
        name = normalize(info.name.removesuffix(".dist-info").rsplit("-", 1)[0])
        if name not in wanted:
            continue
        record = info / "RECORD"
        for line in record.read_text().splitlines() if record.is_file() else ():
            path = (site / line.split(",", 1)[0]).resolve()
            if path.is_relative_to(root) and path.is_file():
                path.unlink()
                emptied.add(path.parent)
        shutil.rmtree(info, ignore_errors=True)
        removed.append(name)
    # Package directories the removal left empty (deepest first), never the target itself.
    for start in sorted(emptied, key=lambda p: -len(p.parts)):
        directory = start
        while directory != root and directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
            directory = directory.parent
    # Console scripts: their shebangs name the build host's interpreter.
    shutil.rmtree(site / "bin", ignore_errors=True)
    return removed


def main(argv: list[str] | None = None) -> int:
    """`python -m infra.packaging`: build (or confirm) every layer in the cache."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rebuild", action="store_true", help="discard cached layers first")
    args = parser.parse_args(argv)
    packaging = Packaging()
    for spec in LAYERS:
        cached = packaging.cached_layer(spec)
        if args.rebuild:
            shutil.rmtree(cached.path, ignore_errors=True)
        asset = packaging.layer(spec, build=True, allow_placeholder=False)
        sys.stdout.write(f"{spec.name}: {asset.path.relative_to(PROJECT_ROOT)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
