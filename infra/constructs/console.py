"""The web console in AWS: a private S3 bucket behind CloudFront, and its sign-in with Cognito.

- S3 (private: public access blocked, TLS only, no website hosting) read by CloudFront through
  origin access control; HTTPS only; every response carries the security headers and the strict
  CSP of infra/console_policy.py, whose connect-src lists the HTTP API, the WebSocket API, the
  user pool domain and the documents bucket (the console uploads a document there with the
  presigned POST: its global and regional virtual-hosted origins, whichever the SDK's URL names).
- Sign-in: a user pool domain with managed login (its branding: Cognito's defaults) and a public
  app client for the authorization code grant with PKCE: no secret, callback and sign-out URLs the
  console's, scopes openid/email/profile (never `aws.cognito.signin.user.admin`, so its tokens
  cannot change the user), allowed to read `custom:tenant` and not to write it. The HTTP API's JWT
  authorizer accepts its ID tokens on every route, the ticket route included.
- config.json is written at deploy time beside the build (BucketDeployment's deploy-time values):
  the API URL, the user pool's endpoints, the client id and the redirect URI.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Annotations, Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from infra import nag
from infra.config import StageConfig
from infra.console_policy import (
    CONSOLE_SCOPES,
    HSTS_MAX_AGE_SECONDS,
    content_security_policy,
    custom_headers,
)
from infra.constructs.api import Api
from infra.constructs.auth import Auth, add_public_client
from infra.constructs.realtime import Realtime
from infra.names import (
    CONSOLE_BRANDING,
    CONSOLE_BUCKET,
    CONSOLE_CLIENT,
    CONSOLE_DEPLOYMENT,
    CONSOLE_DISTRIBUTION,
    CONSOLE_DOMAIN,
    CONSOLE_HEADERS,
)


class Console(Construct):
    """Bucket, distribution, user pool domain and the console's app client, and the deployment."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        auth: Auth,
        api: Api,
        realtime: Realtime,
        documents_bucket: s3.IBucket,
        site: Path,
    ) -> None:
        """`site`: the built console (infra.console_build), or its placeholder when not bundling."""
        super().__init__(scope, construct_id)
        self.domain = auth.user_pool.add_domain(
            CONSOLE_DOMAIN,
            cognito_domain=cognito.CognitoDomainOptions(
                domain_prefix=config.auth_domain_prefix or f"{config.stack_name.lower()}-{Aws.ACCOUNT_ID}"
            ),
            managed_login_version=cognito.ManagedLoginVersion.NEWER_MANAGED_LOGIN,
        )
        auth_origin = self.domain.base_url()
        api_origin = api.http_api.api_endpoint
        websocket_origin = realtime.web_socket_api.api_endpoint
        upload_origins = [
            f"https://{documents_bucket.bucket_name}.s3.amazonaws.com",
            f"https://{documents_bucket.bucket_regional_domain_name}",
        ]
        self.bucket = s3.Bucket(
            self,
            CONSOLE_BUCKET,
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            # Only build output lives here; the deployment empties it when the stack goes.
            removal_policy=RemovalPolicy.DESTROY,
        )
        headers = cloudfront.ResponseHeadersPolicy(
            self,
            CONSOLE_HEADERS,
            comment="outlast console: security headers and a strict CSP",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=content_security_policy(
                        [api_origin, websocket_origin, auth_origin, *upload_origins]
                    ),
                    override=True,
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True
                ),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.NO_REFERRER, override=True
                ),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=Duration.seconds(HSTS_MAX_AGE_SECONDS),
                    include_subdomains=True,
                    override=True,
                ),
            ),
            custom_headers_behavior=cloudfront.ResponseCustomHeadersBehavior(
                custom_headers=[
                    cloudfront.ResponseCustomHeader(header=name, value=value, override=True)
                    for name, value in custom_headers().items()
                ]
            ),
        )
        self.distribution = cloudfront.Distribution(
            self,
            CONSOLE_DISTRIBUTION,
            comment="outlast console",
            default_root_object="index.html",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=headers,
                compress=True,
            ),
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
        )
        default_url = f"https://{self.distribution.distribution_domain_name}/"
        self.url = f"{config.console_origin}/" if config.console_origin else default_url
        self.client = add_public_client(
            auth.user_pool,
            CONSOLE_CLIENT,
            scopes=CONSOLE_SCOPES,
            callback_urls=list(dict.fromkeys([self.url, default_url])),
            logout_urls=list(dict.fromkeys([self.url, default_url])),
            # The console keeps no refresh token (an expired ID token means signing in again).
            refresh_token_validity=Duration.minutes(60),
        )
        api.accept_audience(self.client.user_pool_client_id)
        branding = cognito.CfnManagedLoginBranding(
            self,
            CONSOLE_BRANDING,
            user_pool_id=auth.user_pool.user_pool_id,
            client_id=self.client.user_pool_client_id,
            use_cognito_provided_values=True,
        )
        branding.node.add_dependency(self.domain)
        self.deployment = s3deploy.BucketDeployment(
            self,
            CONSOLE_DEPLOYMENT,
            sources=[
                s3deploy.Source.asset(str(site)),
                s3deploy.Source.json_data(
                    "config.json",
                    {
                        "apiUrl": api_origin,
                        "auth": {
                            "issuer": auth.user_pool.user_pool_provider_url,
                            "authorizeEndpoint": f"{auth_origin}/oauth2/authorize",
                            "tokenEndpoint": f"{auth_origin}/oauth2/token",
                            "logoutEndpoint": f"{auth_origin}/logout",
                            "clientId": self.client.user_pool_client_id,
                            "redirectUri": self.url,
                            "scopes": list(CONSOLE_SCOPES),
                        },
                    },
                ),
            ],
            destination_bucket=self.bucket,
            cache_control=[s3deploy.CacheControl.no_cache()],
            distribution=self.distribution,
            distribution_paths=["/*"],
            prune=True,
            retain_on_delete=False,
            memory_limit=256,
        )
        if not config.console_origin and config.api_cors_origins:
            Annotations.of(self).add_info(
                "consoleOrigin is not set, so the API's CORS allows "
                + ",".join(config.api_cors_origins)
                + " but not the console: after the first deploy set -c consoleOrigin=<the ConsoleUrl "
                "output without its trailing slash> (docs/deploy.md)."
            )
        self._acknowledge()

    def _acknowledge(self) -> None:
        nag.acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "The console bucket holds only the console's public build output and config.json (no user "
            "data); CloudFront is its only reader (origin access control) and BucketDeployment its only "
            "writer. Object access is not worth a log bucket; CloudTrail data events cover audits.",
        )
        nag.acknowledge(
            self.distribution,
            "AwsSolutions-CFR1",
            "No geo restriction: the console is for the stage's users wherever they are; what it shows "
            "is behind sign-in and the API's authorizer, not behind the distribution.",
        )
        nag.acknowledge(
            self.distribution,
            "AwsSolutions-CFR2",
            "No WAF web ACL: the distribution serves a few static files (a WAF web ACL costs a monthly "
            "fee plus per request); every API call is authorized by the HTTP API's JWT authorizer and "
            "throttled there. Stages that want WAF attach a web ACL to the distribution.",
        )
        nag.acknowledge(
            self.distribution,
            "AwsSolutions-CFR3",
            "No CloudFront access logs: the distribution serves only public static files; every call "
            "that matters is an API call, logged by the HTTP API's access log with the caller's sub.",
        )
        nag.acknowledge(
            self.distribution,
            "AwsSolutions-CFR4",
            "The distribution uses the default *.cloudfront.net certificate, for which CloudFront fixes "
            "the viewer TLS policy; a stage with its own domain and ACM certificate sets TLSv1.2_2021. "
            "Viewers are HTTPS only, and HSTS tells browsers never to try anything else.",
        )
        stack = Stack.of(self)
        handler = next(
            (c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment")), None
        )
        if handler is None:  # pragma: no cover - BucketDeployment always adds its singleton function
            raise RuntimeError("BucketDeployment's handler function was not found")
        bucket = Stack.of(self).resolve(self.bucket.node.default_child.logical_id)  # type: ignore[union-attr]
        for rule, reason in (
            (
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaBasicExecutionRole]",
                "BucketDeployment's handler (a CDK-provided function that copies the console into its "
                "bucket at deploy time) writes its own logs through AWSLambdaBasicExecutionRole; it runs "
                "only during deployments.",
            ),
            (
                nag.wildcard_resource(
                    "arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*"
                ),
                "BucketDeployment reads the console's asset zip from the CDK bootstrap asset bucket "
                "(GetObject*, GetBucket*, List*): the objects of that one bucket, CDK's own grant.",
            ),
            (
                nag.wildcard_resource(f"<{bucket}.Arn>/*"),
                "BucketDeployment writes the console's files into the console bucket and prunes those "
                "the new build no longer has: the objects of that one bucket.",
            ),
            (
                nag.wildcard_resource("*"),
                "BucketDeployment's CloudFront invalidation after each deploy (CreateInvalidation, "
                "GetInvalidation): aws-cdk-lib grants it on every distribution; it can only ask a "
                "distribution to fetch fresh copies, nothing else.",
            ),
            (
                "AwsSolutions-L1",
                "BucketDeployment's handler runtime is chosen by aws-cdk-lib to match the AWS CLI layer it "
                "bundles; it moves with the CDK version and runs only during deployments.",
            ),
            *(
                (
                    nag.wildcard_action(action),
                    f"BucketDeployment's own grant ({action}) to copy the console from the CDK asset bucket "
                    "into the console bucket and prune old files; scoped to those two buckets.",
                )
                for action in ("s3:GetBucket*", "s3:GetObject*", "s3:List*", "s3:Abort*", "s3:DeleteObject*")
            ),
        ):
            nag.acknowledge(handler, rule, reason)
