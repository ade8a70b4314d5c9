"""The package a user installs: the wheel built from this checkout, installed into a fresh virtual
environment with its dependencies and nothing else, offline.

pip installs the wheel itself (`--no-index --no-deps`); its dependencies are the distributions
the project's locked environment already holds, copied in with their metadata (the closure of the
wheel's Requires-Dist, extras left out), so no index is asked and `pip check` can still vouch
for the result. Powertools and openai must not be there, and the client must work without them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NOT_IN_THE_CLIENT = {"aws-lambda-powertools", "openai", "boto3", "moto"}


def _source_tree(directory: Path) -> Path:
    """What the build reads, copied: pip builds in place, and a build/ left by an earlier build
    (or by this one in the checkout) must neither leak into this wheel nor be written to."""
    source = directory / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "outlast", source / "outlast", ignore=ignore)
    (source / "infra").mkdir()
    shutil.copy2(ROOT / "infra" / "wheel.py", source / "infra" / "wheel.py")
    return source


def _build_wheel(directory: Path) -> Path:
    subprocess.run(  # noqa: S603 - this interpreter's pip and setuptools (the locked ones), offline
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", str(directory), str(_source_tree(directory))],
        check=True,
        capture_output=True,
        cwd=directory,
    )  # fmt: skip
    (wheel,) = directory.glob("outlast-*.whl")
    return wheel


def _requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(name).decode().splitlines()
    return [Requirement(line.split(":", 1)[1].strip()) for line in lines if line.startswith("Requires-Dist:")]


def _closure(requirements: list[Requirement]) -> dict[str, metadata.Distribution]:
    """The installed distributions the requirements need, transitively (no extras)."""
    environment = {**{k: str(v) for k, v in default_environment().items()}, "extra": ""}
    found: dict[str, metadata.Distribution] = {}
    pending = [r for r in requirements if r.marker is None or r.marker.evaluate(environment)]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        distribution = metadata.distribution(requirement.name)
        assert distribution.version in requirement.specifier, (requirement, distribution.version)
        found[name] = distribution
        for text in distribution.requires or []:
            needed = Requirement(text)
            if needed.marker is None or needed.marker.evaluate(environment):
                pending.append(needed)
    return found


def _copy_into(distributions: dict[str, metadata.Distribution], site_packages: Path) -> None:
    for distribution in distributions.values():
        for file in distribution.files or []:
            if ".." in file.parts or file.suffix == ".pyc":
                continue  # scripts outside site-packages, and caches
            source = Path(str(distribution.locate_file(file)))
            target = site_packages / file
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_file():
                shutil.copy2(source, target)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh environment's bin directory, the wheel)."""
    base = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(base)
    environment = base / "venv"
    venv.EnvBuilder(with_pip=False).create(environment)
    bin_dir = environment / "bin"
    purelib = sysconfig.get_path("purelib", vars={"base": str(environment), "platbase": str(environment)})
    _copy_into(_closure(_requirements(wheel)), Path(purelib))
    subprocess.run(  # noqa: S603 - this interpreter's pip, pointed at the fresh environment, offline
        [sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "--quiet", "--no-index",
         "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return bin_dir, wheel


def _run(bin_dir: Path, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - the fresh environment's own programs
        [str(bin_dir / argv[0]), *argv[1:]], capture_output=True, text=True, check=False, cwd=cwd, env={}
    )


def test_the_wheel_holds_the_client_and_no_lambda_code_or_repository_tools(installed):
    _, wheel = installed
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        names = set(archive.namelist())

    assert {top for top in tops if not top.endswith(".dist-info")} == {"outlast"}
    assert "outlast/client.py" in names
    assert "outlast/api/models.py" in names
    assert not {
        n for n in names if n.startswith(("outlast/bench/", "outlast/chaos/")) or n == "outlast/fuzz.py"
    }


def test_the_client_needs_neither_powertools_nor_openai(installed):
    bin_dir, wheel = installed
    names = {canonicalize_name(r.name) for r in _requirements(wheel) if r.marker is None}

    assert not names & NOT_IN_THE_CLIENT
    check = subprocess.run(  # noqa: S603 - pip's own consistency check of the fresh environment
        [sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    probe = _run(
        bin_dir,
        "python",
        "-I",  # isolated: not even this checkout, from the working directory, on the path
        "-c",
        "import importlib.util as u, outlast.client as c;"
        "assert c.Client and c.StatusDocument;"
        "print([m for m in ('aws_lambda_powertools', 'openai', 'shared', 'functions', 'infra', 'boto3')"
        " if u.find_spec(m)])",
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "[]"


def test_the_installed_command_line_answers_help_and_version(installed, tmp_path):
    bin_dir, _ = installed

    helped = _run(bin_dir, "outlast", "--help", cwd=tmp_path)
    version = _run(bin_dir, "outlast", "--version", cwd=tmp_path)

    assert helped.returncode == 0, helped.stderr
    assert "JOB COMMANDS" in helped.stdout
    assert version.returncode == 0
    assert version.stdout.startswith("outlast ")


def test_local_mode_from_the_wheel_says_it_runs_from_a_checkout(installed, tmp_path):
    bin_dir, _ = installed

    local = _run(bin_dir, "outlast", "local", "token", "--user", "u", cwd=tmp_path)

    assert local.returncode == 2
    assert "run it from a checkout" in local.stderr
    assert "Traceback" not in local.stderr
