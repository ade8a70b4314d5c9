"""The web console in AWS: a private bucket behind CloudFront, its headers, its sign-in client."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk.assertions import Template

from infra.app import build_app
from infra.config import StageConfig
from infra.console_build import build_console, source_digest
from infra.console_policy import content_security_policy
from infra.names import (
    API,
    AUTH,
    CLI_CLIENT,
    CONSOLE,
    CONSOLE_BUCKET,
    CONSOLE_CLIENT,
    CONSOLE_DISTRIBUTION,
    CONSOLE_HEADERS,
    DOCUMENTS,
    DOCUMENTS_BUCKET,
    HTTP_API,
    REALTIME,
    USER_POOL,
    WEBSOCKET_API,
    Output,
)
from infra.packaging import Packaging
from outlast.auth.callbacks import CALLBACK_PORTS, CLI_SCOPES
from outlast.auth.profiles import API_URL_OUTPUT, AUTH_URL_OUTPUT
from outlast.auth.profiles import CLIENT_ID_OUTPUT as CLI_OUTPUT

pytestmark = pytest.mark.infra


def _properties(synthesized, *path: str) -> dict[str, Any]:
    properties: dict[str, Any] = synthesized.resources[synthesized.logical_id(*path)]["Properties"]
    return properties


def test_the_bucket_is_private_and_only_cloudfront_of_this_distribution_reads_it(synthesized):
    bucket = synthesized.logical_id(CONSOLE, CONSOLE_BUCKET)
    distribution = synthesized.logical_id(CONSOLE, CONSOLE_DISTRIBUTION)
    properties = _properties(synthesized, CONSOLE, CONSOLE_BUCKET)

    assert set(properties["PublicAccessBlockConfiguration"].values()) == {True}
    assert "WebsiteConfiguration" not in properties
    (policy,) = [
        p
        for p in synthesized.of_type("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket}
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )
    (read,) = [s for s in statements if s["Effect"] == "Allow"]
    assert read["Principal"] == {"Service": "cloudfront.amazonaws.com"}
    assert read["Action"] == "s3:GetObject"
    assert {"Ref": distribution} in json.loads(json.dumps(read["Condition"]))["StringEquals"][
        "AWS:SourceArn"
    ]["Fn::Join"][1]


def test_the_distribution_is_https_only_through_origin_access_control(synthesized):
    config = _properties(synthesized, CONSOLE, CONSOLE_DISTRIBUTION)["DistributionConfig"]
    behavior = config["DefaultCacheBehavior"]

    assert behavior["ViewerProtocolPolicy"] == "https-only"
    assert behavior["AllowedMethods"] == ["GET", "HEAD"]
    assert behavior["ResponseHeadersPolicyId"] == {"Ref": synthesized.logical_id(CONSOLE, CONSOLE_HEADERS)}
    assert config["DefaultRootObject"] == "index.html"
    (origin,) = config["Origins"]
    assert "OriginAccessControlId" in origin
    assert origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}  # OAC, not the legacy OAI


def test_the_csp_is_strict_and_connects_only_to_the_api_the_websocket_the_user_pool_and_uploads(synthesized):
    config = _properties(synthesized, CONSOLE, CONSOLE_HEADERS)["ResponseHeadersPolicyConfig"]
    security = config["SecurityHeadersConfig"]
    parts = security["ContentSecurityPolicy"]["ContentSecurityPolicy"]["Fn::Join"][1]
    csp = "".join(p if isinstance(p, str) else json.dumps(p) for p in parts)
    http_api = synthesized.logical_id(API, HTTP_API)
    websocket = synthesized.logical_id(REALTIME, WEBSOCKET_API)
    documents = synthesized.logical_id(DOCUMENTS, DOCUMENTS_BUCKET)

    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["require-trusted-types-for"] == "'script'"
    connect = directives["connect-src"]
    assert f'{{"Fn::GetAtt": ["{http_api}", "ApiEndpoint"]}}' in connect
    assert f'{{"Fn::GetAtt": ["{websocket}", "ApiEndpoint"]}}' in connect
    assert ".auth." in connect
    assert "amazoncognito.com" in connect
    # The console uploads documents to their bucket (its presigned POST's URL, global or regional).
    assert f'https://{{"Ref": "{documents}"}}.s3.amazonaws.com' in connect
    assert f'https://{{"Fn::GetAtt": ["{documents}", "RegionalDomainName"]}}' in connect
    assert "*" not in connect
    assert security["StrictTransportSecurity"]["AccessControlMaxAgeSec"] >= 31_536_000
    assert security["FrameOptions"]["FrameOption"] == "DENY"
    assert security["ReferrerPolicy"]["ReferrerPolicy"] == "no-referrer"
    assert security["ContentTypeOptions"]["Override"] is True


def test_the_csp_module_lists_exactly_the_origins_it_is_given():
    csp = content_security_policy(["https://api.example", "wss://ws.example"])

    assert "connect-src 'self' https://api.example wss://ws.example;" in csp
    assert "'unsafe-inline'" not in csp
    assert "'unsafe-eval'" not in csp


def test_the_console_client_is_public_code_with_pkce_and_cannot_write_the_tenant(synthesized):
    properties = _properties(synthesized, AUTH, USER_POOL, CONSOLE_CLIENT)
    distribution = synthesized.logical_id(CONSOLE, CONSOLE_DISTRIBUTION)
    console_url = {"Fn::Join": ["", ["https://", {"Fn::GetAtt": [distribution, "DomainName"]}, "/"]]}

    assert properties["GenerateSecret"] is False
    assert properties["AllowedOAuthFlows"] == ["code"]
    assert properties["AllowedOAuthFlowsUserPoolClient"] is True
    assert set(properties["AllowedOAuthScopes"]) == {"openid", "email", "profile"}
    assert "aws.cognito.signin.user.admin" not in properties["AllowedOAuthScopes"]
    assert properties["CallbackURLs"] == [console_url]
    assert properties["LogoutURLs"] == [console_url]
    assert "custom:tenant" in properties["ReadAttributes"]
    assert "custom:tenant" not in properties["WriteAttributes"]
    assert properties["SupportedIdentityProviders"] == ["COGNITO"]


def test_the_cli_client_is_public_code_with_pkce_on_the_fixed_loopback_ports_only(synthesized):
    properties = _properties(synthesized, AUTH, USER_POOL, CLI_CLIENT)

    assert properties["GenerateSecret"] is False
    assert properties["AllowedOAuthFlows"] == ["code"]
    assert properties["AllowedOAuthFlowsUserPoolClient"] is True
    assert set(properties["AllowedOAuthScopes"]) == set(CLI_SCOPES)
    assert "aws.cognito.signin.user.admin" not in properties["AllowedOAuthScopes"]
    # Cognito matches callback URLs exactly: the ports `outlast login` binds, on 127.0.0.1 only
    assert properties["CallbackURLs"] == [f"http://127.0.0.1:{port}/callback" for port in CALLBACK_PORTS]
    assert "LogoutURLs" not in properties
    assert properties["EnableTokenRevocation"] is True  # `outlast logout` revokes
    assert properties["RefreshTokenValidity"] == 43_200  # minutes: 30 days
    assert "custom:tenant" in properties["ReadAttributes"]
    assert "custom:tenant" not in properties["WriteAttributes"]
    assert properties["SupportedIdentityProviders"] == ["COGNITO"]


def test_the_stack_publishes_what_outlast_login_and_the_operator_tools_read(synthesized):
    outputs = synthesized.template.to_json()["Outputs"]

    assert outputs[CLI_OUTPUT]["Value"] == {"Ref": synthesized.logical_id(AUTH, USER_POOL, CLI_CLIENT)}
    assert {API_URL_OUTPUT, AUTH_URL_OUTPUT, CLI_OUTPUT} <= set(outputs)
    assert outputs[Output.DISPATCH_GRACE_SECONDS]["Value"] == "900"
    assert outputs[Output.MAX_CRASHES]["Value"] == "2"


def test_the_user_pool_domain_uses_managed_login_with_branding_for_the_console_client(synthesized):
    (domain,) = synthesized.of_type("AWS::Cognito::UserPoolDomain").values()
    (branding,) = synthesized.of_type("AWS::Cognito::ManagedLoginBranding").values()

    assert domain["Properties"]["ManagedLoginVersion"] == 2
    assert branding["Properties"]["ClientId"] == {
        "Ref": synthesized.logical_id(AUTH, USER_POOL, CONSOLE_CLIENT)
    }
    assert branding["Properties"]["UseCognitoProvidedValues"] is True


def test_config_json_is_written_at_deploy_time_and_the_cache_invalidated(synthesized):
    (deployment,) = synthesized.of_type("Custom::CDKBucketDeployment").values()
    properties = deployment["Properties"]
    markers = json.dumps(properties["SourceMarkers"])

    assert properties["DestinationBucketName"] == {"Ref": synthesized.logical_id(CONSOLE, CONSOLE_BUCKET)}
    assert properties["DistributionPaths"] == ["/*"]
    assert properties["Prune"] is True
    assert properties["RetainOnDelete"] is False
    for value in ("ApiEndpoint", "ProviderURL", synthesized.logical_id(AUTH, USER_POOL, CONSOLE_CLIENT)):
        assert value in markers


def test_a_console_origin_makes_the_api_allow_that_origin_only(tmp_path):
    # Given a stage that knows its console's origin (a synth of its own)
    _, stack = build_app(
        {"bundle": "false", "consoleOrigin": "https://console.example.com"},
        outdir=str(tmp_path / "cdk.out"),
        packaging=Packaging(build_dir=tmp_path / "build"),
    )

    resources = Template.from_stack(stack).to_json()["Resources"]

    (api,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::ApiGatewayV2::Api" and r["Properties"].get("ProtocolType") == "HTTP"
    ]
    assert api["Properties"]["CorsConfiguration"]["AllowOrigins"] == ["https://console.example.com"]
    (client,) = [
        r for k, r in resources.items() if r["Type"] == "AWS::Cognito::UserPoolClient" and CONSOLE_CLIENT in k
    ]
    assert "https://console.example.com/" in client["Properties"]["CallbackURLs"]


@pytest.mark.parametrize(
    ("context", "origins"),
    [
        ({}, ()),
        ({"consoleOrigin": "https://c.example"}, ("https://c.example",)),
        (
            {"consoleOrigin": "https://c.example", "corsAllowedOrigins": "https://app.example"},
            ("https://c.example", "https://app.example"),
        ),
        ({"corsAllowedOrigins": "https://app.example"}, ("https://app.example",)),
    ],
)
def test_cors_origins_come_from_the_console_origin_and_the_extra_origins(context, origins):
    assert StageConfig.model_validate(context).api_cors_origins == origins


@pytest.mark.parametrize(
    "context",
    [
        {"consoleOrigin": "http://c.example"},
        {"consoleOrigin": "https://c.example/path"},
        {"corsAllowedOrigins": "*"},
        {"corsAllowedOrigins": "https://app.example/path"},
        {"authDomainPrefix": "my-aws-console"},
        {"authDomainPrefix": "Upper"},
    ],
)
def test_bad_console_settings_are_refused_at_synth(context):
    with pytest.raises(ValueError, match=r"consoleOrigin|corsAllowedOrigins|authDomainPrefix"):
        StageConfig.model_validate(context)


def test_the_built_console_has_no_inline_script_style_or_html_sinks(tmp_path):
    # Given the console built as a deploy builds it (esbuild from node_modules)
    site = build_console(build_dir=tmp_path)

    # Then index.html loads only its own files, and nothing needs 'unsafe-inline' or Trusted Types
    page = (site / "index.html").read_text()
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", page, flags=re.DOTALL)
    assert scripts
    assert all('src="' in attributes and body.strip() == "" for attributes, body in scripts)
    assert "<style" not in page
    assert not re.search(r"\sstyle=|\son[a-z]+=", page)
    assert not re.search(r'(src|href)="(https?:)?//', page)
    bundle = (site / "main.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in bundle, sink
    assert (site / "main.css").is_file()
    assert not (site / "config.json").exists()  # each deployment writes its own


def test_the_console_build_is_content_addressed_and_reused(tmp_path):
    first = build_console(build_dir=tmp_path)
    stamp = (first / "main.js").stat().st_mtime_ns

    again = build_console(build_dir=tmp_path)

    assert again == first
    assert (again / "main.js").stat().st_mtime_ns == stamp
    assert first.name == source_digest()
