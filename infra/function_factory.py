"""The function factory: every Lambda function declared once, with the same defaults.

Defaults: arm64, the python3.13 runtime (the build interpreter's version: the layers' bytecode is
compiled for it), JSON logs with Lambda's own system lines at WARN (application lines at INFO, or
DEBUG for a DEBUG stage), X-Ray tracing on the asynchronous functions (the API functions only
with `apiTracing`), an explicit log group with the stage's retention, Powertools environment
variables, its own role (no AWS managed policy: the role may write to its own log group and
nothing else until a capability grants more), the shared code asset and one dependency layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import AssetHashType, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import nag
from infra.config import BundleMode, StageConfig
from infra.environment import powertools_environment
from infra.names import FUNCTION_SUFFIX, LOG_GROUP_SUFFIX, ROLE_SUFFIX, FunctionName
from infra.packaging import LAYERS, PYTHON_VERSION, LayerSpec, Packaging

RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64

if RUNTIME.name != f"python{PYTHON_VERSION}":  # the layers are built for PYTHON_VERSION
    raise RuntimeError(f"runtime {RUNTIME.name} does not match the layers' python{PYTHON_VERSION}")

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}

_XRAY_REASON = (
    "Active X-Ray tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no "
    "resource-level permissions, so AWS requires Resource *."
)
_NO_OTHER_STAR = "No other action of this role has Resource *."
_RUNTIME_REASON = (
    "python3.13, not the newest Python runtime, on purpose: the layers' bytecode only works on the "
    "minor version that compiled it, and the build and CI machines have CPython 3.12 and 3.13, not "
    "3.14. python3.13 is supported until 2029-06-30 (docs/architecture.md, Packaging)."
)


def application_log_level(log_level: str) -> lambda_.ApplicationLogLevel:
    """Lambda's application log level for a stage's `logLevel`: DEBUG for DEBUG, else INFO.

    Never above INFO: Powertools' EMF metric lines carry no level, and Lambda files a line
    without one (or with a level it does not know, such as Python's WARNING) as INFO, so a WARN
    or ERROR filter would drop the metrics. Lambda passes the level to Powertools
    (AWS_LAMBDA_LOG_LEVEL), which takes it over POWERTOOLS_LOG_LEVEL.
    """
    return lambda_.ApplicationLogLevel.DEBUG if log_level == "DEBUG" else lambda_.ApplicationLogLevel.INFO


def retention(days: int) -> logs.RetentionDays:
    """The CloudWatch Logs retention for a validated number of days."""
    return _RETENTION[days]


def removal_policy(config: StageConfig) -> RemovalPolicy:
    """RETAIN for stages that keep their data when the stack goes (the default), else DESTROY."""
    return RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY


@dataclass(frozen=True)
class FunctionSpec:
    """What differs between functions; everything else is the factory's default."""

    name: FunctionName
    layer: LayerSpec
    environment: Mapping[str, str]
    timeout: Duration
    memory_mb: int
    description: str
    # Asynchronous invocations only (the sweeper's schedule); None keeps Lambda's default.
    retry_attempts: int | None = None
    # Active X-Ray tracing. The API functions leave it to `apiTracing`: an HTTP API sends no trace
    # header, so their traces would start at the function and show little that metrics do not.
    traced: bool = True
    # Why any action besides X-Ray's needs Resource * (the tests allow only those AWS requires).
    other_star_resources: str | None = None


class FunctionFactory(Construct):
    """Owns the code asset and the layers; creates functions in the caller's scope."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, packaging: Packaging
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._code = lambda_.Code.from_asset(str(packaging.stage_code()))
        self._layers: dict[str, lambda_.ILayerVersion] = {}
        self.placeholder_layers = False
        for spec in LAYERS:
            asset = (
                packaging.placeholder()
                if config.bundle is BundleMode.OFF
                else packaging.layer(
                    spec,
                    build=config.bundle is BundleMode.ON,
                    allow_placeholder=config.bundle is BundleMode.AUTO,
                )
            )
            self.placeholder_layers |= asset.placeholder
            self._layers[spec.name] = lambda_.LayerVersion(
                self,
                f"{spec.name.capitalize()}Layer",
                code=lambda_.Code.from_asset(
                    str(asset.path), asset_hash=asset.asset_hash, asset_hash_type=AssetHashType.CUSTOM
                ),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[ARCHITECTURE],
                description=spec.description + (" [placeholder]" if asset.placeholder else ""),
                removal_policy=RemovalPolicy.DESTROY,
            )

    def create(self, scope: Construct, spec: FunctionSpec) -> lambda_.Function:
        """A function with its own role and log group, the shared defaults and `spec`'s specifics."""
        prefix = spec.name.construct_id
        role = iam.Role(
            scope,
            f"{prefix}{ROLE_SUFFIX}",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"outlast {spec.name.value} function",
        )
        log_group = logs.LogGroup(
            scope,
            f"{prefix}{LOG_GROUP_SUFFIX}",
            retention=retention(self._config.log_retention_days),
            removal_policy=removal_policy(self._config),
        )
        log_group.grant_write(role)
        function = lambda_.Function(
            scope,
            f"{prefix}{FUNCTION_SUFFIX}",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=spec.name.handler,
            code=self._code,
            layers=[self._layers[spec.layer.name]],
            role=role,
            log_group=log_group,
            # DISABLED leaves TracingConfig out (Lambda's PassThrough) and grants no X-Ray actions.
            tracing=lambda_.Tracing.ACTIVE if spec.traced else lambda_.Tracing.DISABLED,
            # Lambda's START/END/REPORT lines are INFO: at WARN only its warnings and errors
            # (a timeout, an init failure) are written and billed. System levels need JSON format.
            logging_format=lambda_.LoggingFormat.JSON,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            application_log_level_v2=application_log_level(self._config.log_level),
            timeout=spec.timeout,
            memory_size=spec.memory_mb,
            environment={
                **powertools_environment(self._config, spec.name, traced=spec.traced),
                **spec.environment,
            },
            description=spec.description,
            retry_attempts=spec.retry_attempts,
        )
        nag.acknowledge(function, "AwsSolutions-L1", _RUNTIME_REASON)
        star_reasons = [_XRAY_REASON] if spec.traced else []
        if spec.other_star_resources is not None:
            star_reasons.append(spec.other_star_resources)
        if star_reasons:
            if spec.other_star_resources is None:
                star_reasons.append(_NO_OTHER_STAR)
            nag.acknowledge(role, nag.wildcard_resource("*"), " ".join(star_reasons))
        return function
