"""Lambda packaging without Docker: the project's code as one asset, third-party packages in layers.

- Code asset: `shared/` and `functions/` copied into `build/assets/code-<hash>` (no tests, no caches)
  with their bytecode. Every function uses it with its own handler string; its hash changes only
  with the code and this recipe.
- Layers, one per dependency set (the API layer, for submit, status, relay and sweeper, has no
  openai; the worker layer is the same plus openai; the ingest layer is the same plus the
  document parsers, pypdf and defusedxml), installed from their lock files,
  `requirements/layer-<name>.txt` (`make lock`: uv resolves them for the Lambda platform from
  pyproject.toml's `functions` extra, constrained to the dev lock's pins, with every
  distribution's hash). pip installs exactly those wheels (`--require-hashes --no-deps
  --only-binary=:all: --platform manylinux2014_aarch64 --python-version <runtime>`), then the
  layer is compiled and zipped into `build/layers/<name>-<key>.zip`, where the key hashes the lock
  file, the runtime and this recipe; a cached layer is reused offline.
- Bytecode: the runtime mounts layers and code read-only (`/opt`, `/var/task`), so Python can
  never cache what it compiles there: without .pyc every cold start compiles every module it
  imports from source. Both are compiled by the build interpreter, which must be the runtime's
  minor version (the magic number in a .pyc names it; a mismatched .pyc is silently ignored), with
  `--invalidation-mode unchecked-hash`: the default timestamp check would compare against mtimes
  that zipping resets, and a hash check would re-read every source file at each import.
- Reproducible: a layer zip holds its files in sorted order with fixed dates and modes, and the
  .pyc name the runtime's paths and are compiled with a fixed hash seed, so two builds from one
  commit give the same bytes; the zip's SHA-256 is its CDK asset hash (the CDK uploads a .zip asset
  as it is).
- boto3 comes from the Lambda runtime, not the layers: every Python runtime ships boto3 and
  botocore, which AWS patches; the calls the functions make (DynamoDB, S3, SQS, Secrets Manager)
  are long established; and botocore alone is about 25 MB unzipped that every cold start of every
  function would otherwise unpack. The layer locks leave the runtime-provided distributions out
  (aws-xray-sdk depends on botocore), and a pruning pass removes any that still arrive.
- `bundle=false` (tests, local mode) uses a placeholder layer directory: no pip, no network.
  Local mode runs the code with the host's virtual environment standing in for the layers.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = PROJECT_ROOT / "build"
CODE_PACKAGES = ("shared", "functions")

# The Lambda runtime's Python minor version: the layers are locked and compiled for it, the build
# interpreter must be it, and function_factory checks its Runtime matches. `.python-version` (what
# the Makefile creates .venv with) says the same; a test holds them together.
PYTHON_VERSION = "3.13"
PLATFORM = "manylinux2014_aarch64"  # pip's name for the Lambda arm64 platform
LOCK_PLATFORM = "aarch64-manylinux2014"  # uv's name for the same
LOCK_DIR = "requirements"
DEV_LOCK = "dev.txt"
# Where Lambda puts a layer's python/ and the function code: the paths compiled into the .pyc
# (the import system shows the real path anyway; a fixed one keeps the bytes reproducible).
LAYER_MOUNT = "/opt"
CODE_MOUNT = "/var/task"
# Bump when the recipe below changes, so cached layers and staged code are rebuilt.
RECIPE_VERSION = "3"
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
# The earliest date a zip entry can carry; every entry gets it (and one of two modes).
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_FILE_MODE = 0o644
_EXECUTABLE_MODE = 0o755
# A .pyc header's flags word (PEP 552) for `--invalidation-mode unchecked-hash`.
UNCHECKED_HASH_FLAGS = 0b01


class LayerBuildError(RuntimeError):
    """A layer could not be built: no network and no cached layer, a bad lock, a failed compile."""


class BuildInterpreterError(RuntimeError):
    """The build interpreter is not the runtime's Python: its bytecode would be ignored in Lambda."""


@dataclass(frozen=True)
class LayerSpec:
    """A dependency set: the distributions (by name) that one layer carries."""

    name: str
    packages: tuple[str, ...]
    description: str

    @property
    def lock_name(self) -> str:
        """The layer's lock file, under requirements/."""
        return f"layer-{self.name}.txt"


API_LAYER = LayerSpec(
    "api",
    ("aws-lambda-powertools", "pydantic"),
    "outlast dependencies without the model SDK (submit, status, relay, sweeper)",
)
WORKER_LAYER = LayerSpec(
    "worker",
    (*API_LAYER.packages, "openai", "jsonschema"),
    "outlast dependencies with the model SDK and the answers' validator (worker)",
)
INGEST_LAYER = LayerSpec(
    "ingest",
    (*API_LAYER.packages, "pypdf", "defusedxml"),
    "outlast dependencies with the document parsers (ingest)",
)
LAYERS = (API_LAYER, WORKER_LAYER, INGEST_LAYER)


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


# The extra that lists the functions' runtime libraries ([project].dependencies is the client's).
FUNCTIONS_EXTRA = "functions"


def project_dependencies(pyproject: Path = PROJECT_ROOT / "pyproject.toml") -> tuple[str, ...]:
    """The functions' libraries: the `functions` extra of pyproject.toml, as written there."""
    with pyproject.open("rb") as handle:
        return tuple(tomllib.load(handle)["project"]["optional-dependencies"][FUNCTIONS_EXTRA])


def requirements_for(spec: LayerSpec, dependencies: Iterable[str]) -> tuple[str, ...]:
    """The requirement strings of `dependencies` whose names are in the spec, in pyproject order."""
    wanted = {normalize(name) for name in spec.packages}
    selected = tuple(d for d in dependencies if distribution_name(d) in wanted)
    missing = wanted - {distribution_name(d) for d in selected}
    if missing:
        raise ValueError(f"layer {spec.name}: not in pyproject dependencies: {sorted(missing)}")
    return selected


def layer_key(lock: bytes, python_version: str = PYTHON_VERSION, pip_version: str | None = None) -> str:
    """A short hash of everything that decides a layer's content: its lock file and the recipe.

    pip's version counts (the dist-info files it writes differ between releases); it is the one
    requirements/dev.txt pins, so the key only moves when that pin does.
    """
    recipe = {
        "lock": hashlib.sha256(lock).hexdigest(),
        "python": python_version,
        "pip": pip_version or importlib.metadata.version("pip"),
        "platform": PLATFORM,
        "pruned": sorted(RUNTIME_PROVIDED),
        "recipe": RECIPE_VERSION,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def check_interpreter(python_version: str = PYTHON_VERSION) -> None:
    """Fail unless this interpreter is the runtime's minor version (its .pyc carry that magic number)."""
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if running != python_version:
        raise BuildInterpreterError(
            f"the build interpreter is Python {running} but the Lambda runtime is python{python_version}: "
            f"its bytecode would be ignored there. Run from the project's virtual environment "
            f"(`make install` creates it with python{python_version})."
        )


def compile_bytecode(directory: Path, compiled_as: str) -> None:
    """Compile every .py under `directory` in place, as unchecked-hash .pyc for this interpreter.

    `compiled_as` is the directory's path at run time, recorded in the code objects. A fixed hash
    seed keeps set constants in a fixed order, so the bytes do not change from one build to the next.
    """
    check_interpreter()
    command = [
        sys.executable, "-m", "compileall", "-q", "-j", "0",
        "--invalidation-mode", "unchecked-hash", "-d", compiled_as, str(directory),
    ]  # fmt: skip
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)  # noqa: S603
    if completed.returncode != 0:
        raise LayerBuildError(f"compileall failed in {directory.name}:\n{completed.stdout}{completed.stderr}")


def cache_tag(python_version: str = PYTHON_VERSION) -> str:
    """The tag in a .pyc's file name for CPython `python_version` (`cpython-313`)."""
    return "cpython-" + python_version.replace(".", "")


def bytecode_problems(files: Mapping[str, bytes], python_version: str = PYTHON_VERSION) -> list[str]:
    """What keeps the runtime from using a tree's bytecode; `files` maps posix paths to contents.

    Every module needs its `__pycache__/<name>.cpython-3XY.pyc` with the runtime's magic number
    (this interpreter's, which check_interpreter holds to the runtime's version) and the flags
    of unchecked-hash: PEP 552 bit 0 set (hash-based), bit 1 clear (do not check the source).
    """
    check_interpreter(python_version)
    tag = cache_tag(python_version)
    sources = sorted(path for path in files if path.endswith(".py"))
    if not sources:
        return ["no Python modules at all"]
    problems = []
    for source in sources:
        directory, _, name = source.rpartition("/")
        compiled = f"{directory}/__pycache__/{name[:-3]}.{tag}.pyc".lstrip("/")
        header = files.get(compiled, b"")[:16]
        if not header:
            problems.append(f"{source}: no {compiled}")
        elif header[:4] != importlib.util.MAGIC_NUMBER:
            problems.append(f"{compiled}: magic number {header[:4]!r}, not {importlib.util.MAGIC_NUMBER!r}")
        elif int.from_bytes(header[4:8], "little") != UNCHECKED_HASH_FLAGS:
            problems.append(
                f"{compiled}: flags {int.from_bytes(header[4:8], 'little'):#04b}, not unchecked-hash"
            )
    return problems


def zip_contents(path: Path) -> dict[str, bytes]:
    """A zip's files by name."""
    with zipfile.ZipFile(path) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}


def write_zip(source: Path, target: Path) -> str:
    """Zip `source`'s files into `target` reproducibly; return the zip's SHA-256.

    Entries in sorted order, each dated 1980-01-01 with mode 644 (755 if executable), deflated:
    the bytes depend only on the files' paths, contents and executable bits.
    """
    files = sorted(
        (path.relative_to(source).as_posix(), path) for path in source.rglob("*") if path.is_file()
    )
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, path in files:
            info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
            info.create_system = 3  # Unix, so that the mode below is the one extracted
            mode = _EXECUTABLE_MODE if os.access(path, os.X_OK) else _FILE_MODE
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return file_digest(target)


def file_digest(path: Path) -> str:
    """SHA-256 of a file, hex."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@dataclass(frozen=True)
class LayerAsset:
    """What to use as a layer's asset (a zip, or the placeholder directory) and its CDK asset hash."""

    path: Path
    asset_hash: str
    placeholder: bool


class Packaging:
    """Produces the code asset and the layer zips under one build directory.

    `root` holds pyproject.toml, the lock files (requirements/) and the code packages.
    """

    def __init__(self, build_dir: Path = BUILD_DIR, root: Path = PROJECT_ROOT) -> None:
        self._build_dir = build_dir
        self._root = root

    def lock_file(self, spec: LayerSpec) -> Path:
        """The layer's lock file."""
        return self._root / LOCK_DIR / spec.lock_name

    def layer_path(self, spec: LayerSpec) -> Path:
        """Where the layer's zip is cached (it may not exist yet)."""
        lock = self.lock_file(spec)
        if not lock.is_file():
            raise LayerBuildError(
                f"layer {spec.name} has no lock file {LOCK_DIR}/{spec.lock_name}; run `make lock`"
            )
        return self._build_dir / "layers" / f"{spec.name}-{layer_key(lock.read_bytes())}.zip"

    def layer(self, spec: LayerSpec, *, build: bool, allow_placeholder: bool) -> LayerAsset:
        """The cached layer; else a fresh build (`build`); else a placeholder (`allow_placeholder`)."""
        path = self.layer_path(spec)
        if not path.is_file():
            if build:
                self._build(self.lock_file(spec), path)
            elif allow_placeholder:
                return self.placeholder()
            else:
                raise LayerBuildError(f"layer {spec.name} is not built; run `make layers`")
        return LayerAsset(path, file_digest(path), placeholder=False)

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
        """Copy the project's packages, compiled, into `build/assets/code-<hash of content and recipe>`.

        Content-addressed: an unchanged tree is reused as is, and two synths running at once
        (make synth, local mode, tests) never write into the same directory.
        """
        check_interpreter()
        files = code_files(self._root)
        digest = hashlib.sha256(f"python{PYTHON_VERSION} recipe {RECIPE_VERSION}\0".encode())
        for relative in files:
            digest.update(relative.as_posix().encode() + b"\0" + (self._root / relative).read_bytes() + b"\0")
        assets = self._build_dir / "assets"
        target = assets / f"code-{digest.hexdigest()[:16]}"
        if target.is_dir():
            return target
        assets.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".code-", dir=assets))
        staging.chmod(_EXECUTABLE_MODE)
        for relative in files:
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self._root / relative, staging / relative)
        try:
            compile_bytecode(staging, CODE_MOUNT)
            for path in staging.rglob("*"):  # not the umask's modes: the CDK zips them as they are
                path.chmod(_EXECUTABLE_MODE if path.is_dir() else _FILE_MODE)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        try:
            staging.rename(target)
        except OSError:  # another synth staged the same content first
            shutil.rmtree(staging, ignore_errors=True)
        return target

    def _build(self, lock: Path, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.stem}-", dir=target.parent))
        try:
            sys.stderr.write(f"building layer {target.name} for python{PYTHON_VERSION} {PLATFORM} with pip\n")
            content = staging / "content"  # the zip's root: Lambda extracts it into /opt
            site = content / "python"
            command = [
                sys.executable, "-m", "pip", "install",
                "--quiet", "--disable-pip-version-check", "--no-compile",
                "--require-hashes", "--no-deps",
                "--only-binary=:all:", "--platform", PLATFORM, "--implementation", "cp",
                "--python-version", PYTHON_VERSION,
                "--target", str(site),
                "--requirement", str(lock),
            ]  # fmt: skip
            try:
                subprocess.run(command, check=True)  # noqa: S603 - our interpreter, our arguments
            except subprocess.CalledProcessError as error:
                raise LayerBuildError(
                    f"pip could not build {target.name} (no network?). Synthesize offline with "
                    "`-c bundle=auto` (cached layers, else placeholders) or `-c bundle=false`."
                ) from error
            prune(site, RUNTIME_PROVIDED)
            compile_bytecode(site, f"{LAYER_MOUNT}/python")
            archive = staging / "layer.zip"
            write_zip(content, archive)
            problems = bytecode_problems(
                {name.removeprefix("python/"): data for name, data in zip_contents(archive).items()}
            )
            if problems:
                raise LayerBuildError(f"{target.name}: bytecode the runtime would ignore: {problems[:5]}")
            if not target.exists():  # else another build won the race; its result is identical
                archive.replace(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


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
    # Console scripts: their shebangs name the build host's interpreter. Their RECORD lines go
    # too: they carry the scripts' hashes, which would make the layer depend on the build's path.
    shutil.rmtree(site / "bin", ignore_errors=True)
    for record in sorted(site.glob("*.dist-info/RECORD")):
        lines = record.read_text().splitlines(keepends=True)
        kept = [line for line in lines if _inside(site, line.split(",", 1)[0]) or not line.strip()]
        if kept != lines:
            record.write_text("".join(kept))
    return removed


def _inside(site: Path, recorded: str) -> bool:
    """Whether a RECORD path (relative to the site directory) names a file that is still there."""
    path = (site / recorded).resolve()
    return path.is_relative_to(site.resolve()) and not path.is_relative_to((site / "bin").resolve())


def main(argv: list[str] | None = None) -> int:
    """`python -m infra.packaging`: build (or confirm) every layer in the cache."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rebuild", action="store_true", help="discard cached layers first")
    args = parser.parse_args(argv)
    packaging = Packaging()
    for spec in LAYERS:
        if args.rebuild:
            packaging.layer_path(spec).unlink(missing_ok=True)
        asset = packaging.layer(spec, build=True, allow_placeholder=False)
        size_mb = asset.path.stat().st_size / 1e6
        sys.stdout.write(
            f"{spec.name}: {asset.path.relative_to(PROJECT_ROOT)} "
            f"({size_mb:.1f} MB, sha256 {asset.asset_hash})\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
