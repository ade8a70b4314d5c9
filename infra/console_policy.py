"""The web console's response headers: one definition for CloudFront (infra/constructs/console.py)
and for local mode's console front (outlast/local/console_front.py), so the browser tests run the
console under exactly the policy it gets in AWS.

The CSP is strict: scripts, styles and images from the console's own origin only (no inline
script or style, no eval), Trusted Types required for DOM sinks, no frames, no plugins, no form
posts; `connect-src` names the API, the WebSocket API, the user pool domain and the documents bucket
(uploads) and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

# The OAuth scopes the console asks for: an ID token with the user's name and tenant, nothing that
# can change the user (no `aws.cognito.signin.user.admin`).
CONSOLE_SCOPES = ("openid", "email", "profile")
# Everything is small and changes with each deploy: browsers revalidate (ETag) every time.
CACHE_CONTROL = "no-cache"
HSTS_MAX_AGE_SECONDS = 63_072_000  # two years, as hstspreload.org asks
REFERRER_POLICY = "no-referrer"  # the sign-in redirect carries ?code= in the URL: never send it on
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"
CROSS_ORIGIN_OPENER_POLICY = "same-origin"


def content_security_policy(connect_origins: Sequence[str]) -> str:
    """The CSP; `connect_origins` are the API, WebSocket, user pool domain and documents bucket
    origins (no paths)."""
    directives = {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'"],
        "connect-src": ["'self'", *connect_origins],
        "base-uri": ["'none'"],
        "form-action": ["'none'"],
        "frame-ancestors": ["'none'"],
        "object-src": ["'none'"],
        "require-trusted-types-for": ["'script'"],
        "trusted-types": ["'none'"],
    }
    return "; ".join(f"{name} {' '.join(values)}" for name, values in directives.items())


def custom_headers() -> dict[str, str]:
    """The headers CloudFront sets as custom headers (the rest are its security headers)."""
    return {
        "Permissions-Policy": PERMISSIONS_POLICY,
        "Cross-Origin-Opener-Policy": CROSS_ORIGIN_OPENER_POLICY,
    }


def security_headers(connect_origins: Sequence[str], *, https: bool) -> dict[str, str]:
    """Every header CloudFront adds to the console's responses (HSTS only over https)."""
    headers = {
        "Content-Security-Policy": content_security_policy(connect_origins),
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": REFERRER_POLICY,
        **custom_headers(),
    }
    if https:
        headers["Strict-Transport-Security"] = f"max-age={HSTS_MAX_AGE_SECONDS}; includeSubDomains"
    return headers
