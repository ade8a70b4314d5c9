"""Signing in from the command line (DESIGN.md, "The command line"): authorization code + PKCE over a
loopback redirect against Cognito managed login (the local front's /oauth2/* in local mode), the
refresh token kept owner-only, the ID token refreshed when it expires. `OUTLAST_TOKEN` wins."""
