"""Packaging: layer requirement sets from pyproject.toml, cache keys, pruning, the code asset. No pip."""

from __future__ import annotations

import pytest

from infra.packaging import (
    API_LAYER,
    RUNTIME_PROVIDED,
    WORKER_LAYER,
    Packaging,
    distribution_name,
    layer_key,
    project_dependencies,
    prune,
    requirements_for,
)

pytestmark = pytest.mark.infra


def _names(requirements):
    return {distribution_name(requirement) for requirement in requirements}


def test_api_layer_has_no_openai():
    # Given the project's dependencies as pyproject.toml declares them
    dependencies = project_dependencies()

    # When the API layer's requirements are selected
    requirements = requirements_for(API_LAYER, dependencies)

    # Then openai is not among them, and the ranges are pyproject's own strings
    assert "openai" not in _names(requirements)
    assert _names(requirements) == {"aws-lambda-powertools", "pydantic"}
    assert set(requirements) <= set(dependencies)


def test_worker_layer_is_the_api_layer_plus_openai():
    dependencies = project_dependencies()

    assert _names(requirements_for(WORKER_LAYER, dependencies)) == _names(
        requirements_for(API_LAYER, dependencies)
    ) | {"openai"}


def test_boto3_comes_from_the_runtime_not_a_layer():
    dependencies = project_dependencies()

    for spec in (API_LAYER, WORKER_LAYER):
        assert not _names(requirements_for(spec, dependencies)) & RUNTIME_PROVIDED


def test_a_layer_package_missing_from_pyproject_is_an_error():
    with pytest.raises(ValueError, match="openai"):
        requirements_for(WORKER_LAYER, ["aws-lambda-powertools[tracer]>=3", "pydantic>=2"])


def test_distribution_names_are_normalized():
    assert distribution_name("aws_lambda.Powertools[tracer]>=3.20,<4") == "aws-lambda-powertools"


def test_layer_key_changes_with_requirements_and_runtime():
    base = layer_key(["pydantic>=2.9,<3"], "3.14")

    assert layer_key(["pydantic>=2.9,<3"], "3.14") == base
    assert layer_key(["pydantic>=2.10,<3"], "3.14") != base
    assert layer_key(["pydantic>=2.9,<3"], "3.13") != base


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


def test_code_asset_holds_only_the_projects_packages(tmp_path):
    # When the code asset is staged
    code = Packaging(build_dir=tmp_path).stage_code()

    # Then it holds shared/ and functions/ with their handlers, and no tests or caches
    assert sorted(p.name for p in code.iterdir()) == ["functions", "shared"]
    assert (code / "functions" / "submit" / "handler.py").is_file()
    assert (code / "shared" / "resources.py").is_file()
    assert not [p for p in code.rglob("*") if p.name in {"__pycache__", "tests"} or p.suffix == ".pyc"]


def test_unbundled_layers_are_placeholders(tmp_path):
    packaging = Packaging(build_dir=tmp_path)

    asset = packaging.layer(API_LAYER, build=False, allow_placeholder=True)

    assert asset.placeholder
    assert (asset.path / "python").is_dir()


def test_a_cached_layer_is_reused_without_pip(tmp_path):
    packaging = Packaging(build_dir=tmp_path)
    cached = packaging.cached_layer(WORKER_LAYER)
    (cached.path / "python").mkdir(parents=True)

    asset = packaging.layer(WORKER_LAYER, build=False, allow_placeholder=False)

    assert asset == cached
    assert not asset.placeholder
