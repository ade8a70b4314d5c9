"""Packaging: the runtime's Python everywhere, the lock files, bytecode, reproducible layers.

No network, but for the real layers: `test_a_built_layer_holds_the_runtimes_bytecode` builds
them from the package registry (as `make layers` does) unless build/layers already holds this
lock's build, so it runs wherever the tests run, CI included, and is never skipped.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import os
import py_compile
import re
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from infra.function_factory import RUNTIME
from infra.packaging import (
    API_LAYER,
    DEV_LOCK,
    INGEST_LAYER,
    LAYERS,
    LOCK_DIR,
    PROJECT_ROOT,
    PYTHON_VERSION,
    RUNTIME_PROVIDED,
    UNCHECKED_HASH_FLAGS,
    WORKER_LAYER,
    LayerSpec,
    Packaging,
    bytecode_problems,
    cache_tag,
    distribution_name,
    layer_key,
    project_dependencies,
    prune,
    requirements_for,
    write_zip,
    zip_contents,
)

pytestmark = pytest.mark.infra

PYPROJECT = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
# A pin in a uv lock file: `name==version` with an optional marker, then its hashes.
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")
# What pip and uv see on the Lambda platform (arm64 Linux, the runtime's CPython).
LAMBDA_ENVIRONMENT = {
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "platform_machine": "aarch64",
    "platform_system": "Linux",
    "sys_platform": "linux",
    "os_name": "posix",
    "python_version": PYTHON_VERSION,
    "python_full_version": f"{PYTHON_VERSION}.0",
}


def _names(requirements):
    return {distribution_name(requirement) for requirement in requirements}


def _lock(name: str) -> dict[str, tuple[str, str | None, int]]:
    """A lock file's pins: name -> (version, marker, number of hashes)."""
    pins: dict[str, tuple[str, str | None, int]] = {}
    current = None
    for line in (PROJECT_ROOT / LOCK_DIR / name).read_text().splitlines():
        match = _PIN.match(line)
        if match:
            current = canonicalize_name(match.group(1))
            pins[current] = (match.group(2), match.group(3), 0)
        elif "--hash=sha256:" in line and current is not None:
            version, marker, hashes = pins[current]
            pins[current] = (version, marker, hashes + 1)
    return pins


def _closure(requirements, environment) -> set[str]:
    """Every distribution `requirements` need, from the installed metadata (the same versions)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        for text in importlib.metadata.requires(key[0]) or []:
            needed = Requirement(text)
            if needed.marker is None or any(
                needed.marker.evaluate({**environment, "extra": extra}) for extra in ("", *requirement.extras)
            ):
                pending.append(needed)
    return {name for name, _ in seen}


# --- the runtime's Python, everywhere ------------------------------------------------------------


def test_one_python_minor_version_for_the_runtime_the_venv_and_the_tools():
    # The runtime the functions declare, the layers' build, the venv (.python-version), the tools
    assert f"python{PYTHON_VERSION}" == RUNTIME.name
    assert (PROJECT_ROOT / ".python-version").read_text().strip() == PYTHON_VERSION
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == PYTHON_VERSION
    assert SpecifierSet(PYPROJECT["project"]["requires-python"]) == SpecifierSet(f">={PYTHON_VERSION}")
    assert PYPROJECT["tool"]["mypy"]["python_version"] == PYTHON_VERSION
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py" + PYTHON_VERSION.replace(".", "")


# --- layer dependency sets -------------------------------------------------------------------------


def test_api_layer_has_no_openai():
    # Given the project's dependencies as pyproject.toml declares them
    dependencies = project_dependencies()

    # When the API layer's requirements are selected
    requirements = requirements_for(API_LAYER, dependencies)

    # Then openai is not among them, and the ranges are pyproject's own strings
    assert "openai" not in _names(requirements)
    assert _names(requirements) == {"aws-lambda-powertools", "pydantic"}
    assert set(requirements) <= set(dependencies)


def test_worker_layer_is_the_api_layer_plus_openai_and_the_answers_validator():
    dependencies = project_dependencies()

    assert _names(requirements_for(WORKER_LAYER, dependencies)) == _names(
        requirements_for(API_LAYER, dependencies)
    ) | {"openai", "jsonschema"}


def test_ingest_layer_is_the_api_layer_plus_the_document_parsers():
    dependencies = project_dependencies()

    assert _names(requirements_for(INGEST_LAYER, dependencies)) == _names(
        requirements_for(API_LAYER, dependencies)
    ) | {"pypdf", "defusedxml"}


@pytest.mark.parametrize("spec", [API_LAYER, WORKER_LAYER], ids=lambda spec: spec.name)
def test_only_the_ingest_layer_carries_the_document_parsers(spec):
    # The API and worker functions never parse a file: their layers (and cold starts) stay without
    assert not {"pypdf", "defusedxml"} & set(_lock(spec.lock_name))
    assert {"pypdf", "defusedxml"} <= set(_lock(INGEST_LAYER.lock_name))


def test_a_layer_package_missing_from_pyproject_is_an_error():
    with pytest.raises(ValueError, match="openai"):
        requirements_for(WORKER_LAYER, ["aws-lambda-powertools[tracer]>=3", "pydantic>=2"])


def test_distribution_names_are_normalized():
    assert distribution_name("aws_lambda.Powertools[tracer]>=3.20,<4") == "aws-lambda-powertools"


# --- the lock files ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [DEV_LOCK, *(spec.lock_name for spec in LAYERS)])
def test_every_pin_is_exact_and_hashed(name):
    pins = _lock(name)

    assert pins
    assert [pin for pin, (_, _, hashes) in pins.items() if hashes == 0] == []


@pytest.mark.parametrize("spec", LAYERS, ids=lambda spec: spec.name)
def test_layer_locks_pin_what_the_dev_lock_pins(spec):
    # Given the dev lock (what CI and local mode install) and a layer's lock
    dev, layer = _lock(DEV_LOCK), _lock(spec.lock_name)

    # Then the layer ships exactly the versions the tests run against
    assert {name: version for name, (version, _, _) in layer.items()} == {
        name: dev[name][0] for name in layer
    }


@pytest.mark.parametrize("spec", LAYERS, ids=lambda spec: spec.name)
def test_layer_locks_satisfy_pyproject_and_leave_the_runtime_provided_out(spec):
    layer = _lock(spec.lock_name)

    for text in requirements_for(spec, project_dependencies()):
        requirement = Requirement(text)
        assert requirement.specifier.contains(layer[canonicalize_name(requirement.name)][0]), text
    assert not set(layer) & RUNTIME_PROVIDED
    assert ("openai" in layer) is ("openai" in spec.packages)
    # Resolved for one platform: nothing is left to a marker pip would judge on the build host
    assert [name for name, (_, marker, _) in layer.items() if marker] == []


@pytest.mark.parametrize("spec", LAYERS, ids=lambda spec: spec.name)
def test_layer_locks_are_complete_for_an_install_without_dependency_resolution(spec):
    # Given the layer's direct requirements and their dependencies on the Lambda platform
    # (read from the venv's metadata, which holds the same versions)
    needed = _closure(requirements_for(spec, project_dependencies()), LAMBDA_ENVIRONMENT)

    # Then `pip install --no-deps` of the lock installs all of them, but what the runtime provides
    assert needed - RUNTIME_PROVIDED == set(_lock(spec.lock_name))


@pytest.mark.parametrize("spec", LAYERS, ids=lambda spec: spec.name)
def test_the_venv_runs_the_layers_pins(spec):
    for name, (version, _, _) in _lock(spec.lock_name).items():
        assert importlib.metadata.version(name) == version, f"{name}: run `make install`"


def test_the_dev_lock_covers_every_dev_requirement():
    dev = _lock(DEV_LOCK)
    extras = PYPROJECT["project"]["optional-dependencies"]
    requirements = [*PYPROJECT["project"]["dependencies"], *extras["local"], *extras["dev"]]

    for text in requirements:
        requirement = Requirement(text)
        if canonicalize_name(requirement.name) == "outlast":
            continue
        assert requirement.specifier.contains(dev[canonicalize_name(requirement.name)][0]), text


def test_layer_key_changes_with_the_lock_the_runtime_and_pip():
    base = layer_key(b"pydantic==2.9.0\n", "3.13", "26.3")

    assert layer_key(b"pydantic==2.9.0\n", "3.13", "26.3") == base
    assert layer_key(b"pydantic==2.10.0\n", "3.13", "26.3") != base
    assert layer_key(b"pydantic==2.9.0\n", "3.12", "26.3") != base
    assert layer_key(b"pydantic==2.9.0\n", "3.13", "26.2") != base


def test_the_layers_are_built_by_the_locked_pip():
    assert importlib.metadata.version("pip") == _lock(DEV_LOCK)["pip"][0]


# --- bytecode ----------------------------------------------------------------------------------


def _compiled(source: str, mode: py_compile.PycInvalidationMode, tmp_path: Path) -> bytes:
    path = tmp_path / "module.py"
    path.write_text(source)
    compiled = tmp_path / "m.pyc"
    py_compile.compile(str(path), cfile=str(compiled), invalidation_mode=mode, doraise=True)
    return compiled.read_bytes()


def test_the_bytecode_check_accepts_unchecked_hash_pycs_of_the_runtime(tmp_path):
    # Given a module compiled by this interpreter (the runtime's version) as unchecked-hash
    pyc = _compiled("X = 1\n", py_compile.PycInvalidationMode.UNCHECKED_HASH, tmp_path)
    tree = {"pkg/module.py": b"X = 1\n", f"pkg/__pycache__/module.{cache_tag()}.pyc": pyc}

    # Then the header holds the runtime's magic number and the unchecked-hash flags
    assert pyc[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(pyc[4:8], "little") == UNCHECKED_HASH_FLAGS == 0b01
    assert bytecode_problems(tree) == []


@pytest.mark.parametrize(
    "mode",
    [py_compile.PycInvalidationMode.TIMESTAMP, py_compile.PycInvalidationMode.CHECKED_HASH],
    ids=["timestamp", "checked-hash"],
)
def test_the_bytecode_check_rejects_other_invalidation_modes(tmp_path, mode):
    pyc = _compiled("X = 1\n", mode, tmp_path)
    tree = {"module.py": b"X = 1\n", f"__pycache__/module.{cache_tag()}.pyc": pyc}

    assert bytecode_problems(tree) == [
        f"__pycache__/module.{cache_tag()}.pyc: flags "
        + ("0b00" if mode is py_compile.PycInvalidationMode.TIMESTAMP else "0b11")
        + ", not unchecked-hash"
    ]


def test_the_bytecode_check_rejects_another_magic_number_and_missing_pycs(tmp_path):
    pyc = _compiled("X = 1\n", py_compile.PycInvalidationMode.UNCHECKED_HASH, tmp_path)
    other = (int.from_bytes(importlib.util.MAGIC_NUMBER[:2], "little") - 1).to_bytes(2, "little") + b"\r\n"
    tree = {
        "a.py": b"X = 1\n",
        f"__pycache__/a.{cache_tag()}.pyc": other + pyc[4:],
        "b.py": b"X = 1\n",
        "__pycache__/b.cpython-312.pyc": pyc,  # another version's file: the runtime never looks
    }

    problems = bytecode_problems(tree)

    assert [problem.split(":")[0] for problem in problems] == [f"__pycache__/a.{cache_tag()}.pyc", "b.py"]


# --- the code asset ----------------------------------------------------------------------------


def test_code_asset_holds_only_the_projects_packages_compiled(tmp_path):
    # When the code asset is staged
    code = Packaging(build_dir=tmp_path).stage_code()

    # Then it holds shared/ and functions/ with their handlers, and no tests or source-tree caches
    assert sorted(p.name for p in code.iterdir()) == ["functions", "shared"]
    assert (code / "functions" / "submit" / "handler.py").is_file()
    assert (code / "shared" / "resources.py").is_file()
    assert not [p for p in code.rglob("*") if p.name == "tests"]
    # And every module's bytecode, as the runtime will use it from read-only /var/task
    files = {p.relative_to(code).as_posix(): p.read_bytes() for p in code.rglob("*") if p.is_file()}
    assert bytecode_problems(files) == []
    assert {p.suffix for p in code.rglob("*") if p.is_file()} == {".py", ".pyc"}
    assert {oct(p.stat().st_mode & 0o777) for p in code.rglob("*") if p.is_file()} == {"0o644"}


# --- layers ------------------------------------------------------------------------------------


def test_prune_removes_runtime_provided_distributions_by_record(tmp_path):
    # Given a target directory with boto3 installed next to pydantic
    site = tmp_path / "python"
    (site / "boto3").mkdir(parents=True)
    (site / "boto3" / "__init__.py").write_text("")
    info = site / "boto3-1.40.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("boto3/__init__.py,,\nboto3-1.40.0.dist-info/RECORD,,\n")
    (site / "pydantic").mkdir()
    (site / "pydantic" / "__init__.py").write_text("")
    (site / "pydantic-2.9.0.dist-info").mkdir()
    (site / "bin").mkdir()
    (site / "bin" / "script").write_text("#!/somewhere/python")

    # When the runtime-provided distributions are pruned
    removed = prune(site, RUNTIME_PROVIDED)

    # Then boto3 and the scripts are gone, pydantic stays
    assert removed == ["boto3"]
    assert sorted(p.name for p in site.iterdir()) == ["pydantic", "pydantic-2.9.0.dist-info"]


def test_prune_drops_the_record_lines_of_the_removed_scripts(tmp_path):
    site = tmp_path / "python"
    (site / "tool").mkdir(parents=True)
    (site / "tool" / "__init__.py").write_text("")
    (site / "bin").mkdir()
    (site / "bin" / "tool").write_text("#!/build/host/python")
    info = site / "tool-1.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text(
        "../../bin/tool,sha256=abc,20\ntool/__init__.py,,\ntool-1.0.dist-info/RECORD,,\n"
    )

    prune(site, RUNTIME_PROVIDED)

    assert (info / "RECORD").read_text() == "tool/__init__.py,,\ntool-1.0.dist-info/RECORD,,\n"


def test_unbundled_layers_are_placeholders(tmp_path):
    packaging = Packaging(build_dir=tmp_path)

    asset = packaging.layer(API_LAYER, build=False, allow_placeholder=True)

    assert asset.placeholder
    assert (asset.path / "python").is_dir()


def test_a_cached_layer_is_reused_without_pip(tmp_path):
    packaging = Packaging(build_dir=tmp_path)
    cached = packaging.layer_path(WORKER_LAYER)
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"a zip")

    asset = packaging.layer(WORKER_LAYER, build=False, allow_placeholder=False)

    assert asset.path == cached
    assert asset.asset_hash == hashlib.sha256(b"a zip").hexdigest()
    assert not asset.placeholder


def test_the_layer_zip_depends_only_on_paths_contents_and_executable_bits(tmp_path):
    # Given the same files written twice, with other dates, modes and creation order
    first, second = tmp_path / "a", tmp_path / "b"
    for root, names in ((first, ["x/b.py", "x/a.py", "run"]), (second, ["run", "x/a.py", "x/b.py"])):
        for name in names:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(name)
    (first / "run").chmod(0o755)
    (second / "run").chmod(0o775)
    (second / "x" / "a.py").chmod(0o664)
    os.utime(second / "x" / "b.py", (1_000_000_000, 1_000_000_000))

    # When each is zipped
    digests = [write_zip(root, tmp_path / f"{root.name}.zip") for root in (first, second)]

    # Then the bytes are the same: sorted entries, one date, modes 644 and 755
    assert digests[0] == digests[1]
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        infos = archive.infolist()
    assert [i.filename for i in infos] == ["run", "x/a.py", "x/b.py"]
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert [oct(i.external_attr >> 16) for i in infos] == ["0o100755", "0o100644", "0o100644"]


def _wheel(directory: Path) -> Path:
    """A small pure-Python wheel, made here: a layer can be built from it with no network."""
    files = {
        "tinypkg/__init__.py": "NAMES = frozenset({'alpha', 'beta', 'gamma', 'delta'})\n",
        "tinypkg/sub/__init__.py": "",
        "tinypkg/sub/mod.py": "def known(name):\n    return name in {'one', 'two', 'three', 'four'}\n",
        "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        # pip writes a script for it whose shebang (and so its RECORD hash) names the build's python
        "tinypkg-1.0.dist-info/entry_points.txt": "[console_scripts]\ntiny = tinypkg.sub.mod:known\n",
        "tinypkg-1.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files["tinypkg-1.0.dist-info/RECORD"] = "\n".join([*record, "tinypkg-1.0.dist-info/RECORD,,"]) + "\n"
    wheel = directory / "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), text)
    return wheel


def test_a_layer_built_twice_from_its_lock_has_the_same_bytes_and_runtime_bytecode(tmp_path, monkeypatch):
    # Given a lock file pinning a local wheel by hash, and pip pointed at that wheel only
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = _wheel(wheels)
    root = tmp_path / "project"
    (root / LOCK_DIR).mkdir(parents=True)
    spec = LayerSpec("tiny", ("tinypkg",), "a layer for the test")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (root / LOCK_DIR / spec.lock_name).write_text(f"tinypkg==1.0 \\\n    --hash=sha256:{digest}\n")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))

    # When the layer is built twice, in two build directories, by the real recipe
    assets = [
        Packaging(build_dir=tmp_path / f"build-{n}", root=root).layer(
            spec, build=True, allow_placeholder=False
        )
        for n in (1, 2)
    ]

    # Then both zips are the same bytes, and so have the same asset hash
    assert assets[0].asset_hash == assets[1].asset_hash
    assert assets[0].path.read_bytes() == assets[1].path.read_bytes()
    # And the modules sit under python/ with the runtime's unchecked-hash bytecode beside them
    files = zip_contents(assets[0].path)
    assert f"python/tinypkg/sub/__pycache__/mod.{cache_tag()}.pyc" in files
    assert bytecode_problems({k.removeprefix("python/"): v for k, v in files.items()}) == []
    # And nothing in it depends on where it was built: no scripts, no record of them, no paths
    assert not [name for name in files if name.startswith("python/bin/")]
    record = files["python/tinypkg-1.0.dist-info/RECORD"].decode()
    assert "bin/" not in record
    assert "tinypkg/sub/mod.py" in record
    for marker in (str(tmp_path), sys.prefix):
        assert not [name for name, data in files.items() if marker.encode() in data], marker


@pytest.mark.parametrize("spec", LAYERS, ids=lambda spec: spec.name)
def test_a_built_layer_holds_the_runtimes_bytecode(spec):
    # The real layer, as a deploy ships it: from build/layers, built there first if this lock's
    # build is not (pip from the registry, as `make layers`; about 25 s for both layers)
    layer = Packaging().layer(spec, build=True, allow_placeholder=False)
    assert not layer.placeholder

    files = zip_contents(layer.path)

    assert {name.split("/")[0] for name in files} == {"python"}
    modules = [name for name in files if name.endswith(".py")]
    assert len([name for name in files if name.endswith(f".{cache_tag()}.pyc")]) == len(modules) > 100
    assert bytecode_problems({k.removeprefix("python/"): v for k, v in files.items()}) == []
    installed = {
        distribution_name(name.split("/")[1].removesuffix(".dist-info").rsplit("-", 1)[0])
        for name in files
        if name.endswith(".dist-info/METADATA")
    }
    assert installed == set(_lock(spec.lock_name))
