"""Identity: the Cognito user pool whose ID tokens the HTTP API's JWT authorizer accepts, the API's
app client, and the command line's (`outlast login`: authorization code + PKCE on loopback)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cognito as cognito
from constructs import Construct

from infra import nag
from infra.config import StageConfig
from infra.function_factory import removal_policy
from infra.names import CLI_CLIENT, TENANT_ATTRIBUTE, USER_POOL, USER_POOL_CLIENT
from outlast.auth.callbacks import CALLBACK_URLS, CLI_SCOPES

_SCOPES = {
    "openid": cognito.OAuthScope.OPENID,
    "email": cognito.OAuthScope.EMAIL,
    "profile": cognito.OAuthScope.PROFILE,
}


def _reads() -> cognito.ClientAttributes:
    """A client may read `custom:tenant` in tokens (and never write it: `_writes`)."""
    return (
        cognito.ClientAttributes()
        .with_standard_attributes(email=True, email_verified=True)
        .with_custom_attributes(TENANT_ATTRIBUTE)
    )


def _writes() -> cognito.ClientAttributes:
    """Only admins write the tenant (DESIGN.md, "Identity"): a client writes the email alone."""
    return cognito.ClientAttributes().with_standard_attributes(email=True)


def add_public_client(
    user_pool: cognito.UserPool,
    construct_id: str,
    *,
    scopes: tuple[str, ...],
    callback_urls: list[str],
    logout_urls: list[str] | None,
    refresh_token_validity: Duration,
) -> cognito.UserPoolClient:
    """A public app client (no secret) for the authorization code grant with PKCE through managed
    login, 60-minute ID tokens, revocable refresh tokens, the tenant readable and never writable."""
    return user_pool.add_client(
        construct_id,
        generate_secret=False,
        auth_flows=cognito.AuthFlow(user_srp=True),
        o_auth=cognito.OAuthSettings(
            flows=cognito.OAuthFlows(authorization_code_grant=True),
            scopes=[_SCOPES[name] for name in scopes],
            callback_urls=callback_urls,
            logout_urls=logout_urls,
        ),
        supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
        prevent_user_existence_errors=True,
        enable_token_revocation=True,
        id_token_validity=Duration.minutes(60),
        access_token_validity=Duration.minutes(60),
        refresh_token_validity=refresh_token_validity,
        read_attributes=_reads(),
        write_attributes=_writes(),
    )


class Auth(Construct):
    """User pool (strong passwords, `custom:tenant` set by admins only), the API's app client and the
    command line's."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        self.user_pool = cognito.UserPool(
            self,
            USER_POOL,
            self_sign_up_enabled=config.self_sign_up,
            sign_in_aliases=cognito.SignInAliases(username=True),
            sign_in_case_sensitive=False,
            standard_attributes=cognito.StandardAttributes(
                email=cognito.StandardAttribute(required=False, mutable=True)
            ),
            custom_attributes={
                TENANT_ATTRIBUTE: cognito.StringAttribute(min_len=1, max_len=64, mutable=True)
            },
            password_policy=cognito.PasswordPolicy(
                min_length=12,
                require_lowercase=True,
                require_uppercase=True,
                require_digits=True,
                require_symbols=True,
                temp_password_validity=Duration.days(3),
            ),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            # Optional TOTP: people can enrol; service users that sign in with admin auth are not
            # challenged. SMS stays off (no SMS role, no per-message cost).
            mfa=cognito.Mfa.OPTIONAL,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            feature_plan=cognito.FeaturePlan.PLUS
            if config.threat_protection
            else cognito.FeaturePlan.ESSENTIALS,
            standard_threat_protection_mode=(
                cognito.StandardThreatProtectionMode.FULL_FUNCTION if config.threat_protection else None
            ),
            deletion_protection=config.retain_data,
            removal_policy=removal_policy(config),
        )
        self.client = self.user_pool.add_client(
            USER_POOL_CLIENT,
            auth_flows=cognito.AuthFlow(user_password=True, user_srp=True, admin_user_password=True),
            generate_secret=False,
            disable_o_auth=True,
            prevent_user_existence_errors=True,
            enable_token_revocation=True,
            id_token_validity=Duration.minutes(60),
            access_token_validity=Duration.minutes(60),
            refresh_token_validity=Duration.days(30),
            read_attributes=_reads(),
            write_attributes=_writes(),
        )
        # `outlast login`: a public client (no secret) for the authorization code grant with PKCE,
        # redirected to a few fixed loopback ports (Cognito matches callback URLs exactly, and
        # accepts the loopback IP literal over http). Its refresh token lasts 30 days; the CLI
        # renews the ID token with it and `outlast logout` revokes it.
        self.cli_client = add_public_client(
            self.user_pool,
            CLI_CLIENT,
            scopes=CLI_SCOPES,
            callback_urls=list(CALLBACK_URLS),
            logout_urls=None,
            refresh_token_validity=Duration.days(30),
        )
        self._acknowledge(config)

    def _acknowledge(self, config: StageConfig) -> None:
        nag.acknowledge(
            self.user_pool,
            "AwsSolutions-COG2",
            "MFA is optional (TOTP), not required: the API's callers include service users that sign in "
            "with admin auth and cannot answer an MFA challenge. People should enrol; the strong password "
            "policy and short-lived ID tokens (60 minutes) apply to everyone.",
        )
        if not config.threat_protection:
            nag.acknowledge(
                self.user_pool,
                "AwsSolutions-COG8",
                "Threat protection (advanced security) needs the Cognito Plus feature plan, billed per "
                "monthly active user on top of Essentials. Stages that want it set the context key "
                "threatProtection=true, which switches to Plus with FULL_FUNCTION enforcement.",
            )
