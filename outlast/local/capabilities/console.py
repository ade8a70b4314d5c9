"""The web console and its sign-in, emulated: the console's own origin, and Cognito's managed login.

Emulates infra/constructs/console.py (the built console behind CloudFront, its config.json, its
strict CSP) and the sign-in half of infra/constructs/auth.py and console.py (the user pool
domain's managed login for the console's app client and the command line's, `outlast login`):
the console is built offline with esbuild and served from a port of its own, and the
authorization code + PKCE endpoints (/oauth2/authorize, /oauth2/token, /oauth2/revoke, /logout)
are served on the API front by outlast.local.oauth, signing users in against moto's user pool.
"""

from __future__ import annotations

import socket
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any

import boto3

from infra.console_build import ConsoleBuildError, build_console
from infra.console_policy import CONSOLE_SCOPES
from infra.names import CLI_CLIENT, CONSOLE_CLIENT
from outlast.auth.callbacks import CALLBACK_URLS
from outlast.local.capabilities.base import Log, Starter
from outlast.local.console_front import ConsoleFront
from outlast.local.oauth import LocalAuthorizationServer, PublicClient
from outlast.local.provision import LocalResources
from outlast.local.template import REGION
from outlast.local.users import refresh, sign_in


@dataclass(frozen=True)
class AppClients:
    """The user pool's app clients local mode serves, by their construct ids."""

    api: str | None  # the API's own (tokens for scripts and tests)
    console: str | None
    cli: str | None  # `outlast login`

    @classmethod
    def of(cls, resources: LocalResources) -> AppClients:
        """Read them from the provisioned user pool clients."""
        api = console = cli = None
        for logical_id, client_id in resources.user_pool_clients.items():
            if CONSOLE_CLIENT in logical_id:
                console = client_id
            elif CLI_CLIENT in logical_id:
                cli = cli or client_id
            elif api is None:
                api = client_id
        return cls(api, console, cli)


class Console(Starter):
    """The console's front (when it is built and the template has its client) and the local sign-in."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self._resources = LocalResources()
        self.clients = AppClients(None, None, None)
        self._front: ConsoleFront | None = None
        self._serving = False

    @property
    def url(self) -> str | None:
        """The console's URL (after bind), or None when it is not served (not built, no client)."""
        return self._front.url if self._front is not None else None

    @property
    def origin(self) -> str | None:
        """The console's origin, the one the API's CORS allows (after bind), or None when not served."""
        return self._front.origin if self._front is not None else None

    def bind(self, resources: LocalResources, port: int | None, api_port: int) -> Console:
        """Find the app clients, build the console (esbuild, offline; reused when unchanged) and bind
        its port: `port`, or when None the API's port + 1 when free, else any free one."""
        self._resources = resources
        self.clients = AppClients.of(resources)
        if self.clients.console is None:
            return self
        try:
            site = build_console()
        except ConsoleBuildError as error:
            self._log(f"console: not served ({error})")
            return self
        if port is None:
            port = api_port + 1 if _free(api_port + 1) else 0
        self._front = ConsoleFront(site, port=port)
        return self

    def authorization_server(self, endpoint: str) -> LocalAuthorizationServer | None:
        """The managed login's endpoints for the API front, or None when no client signs in there."""
        clients = [PublicClient(self.clients.cli, CALLBACK_URLS)] if self.clients.cli else []
        if self._front is not None and self.clients.console is not None:
            url = self._front.url
            clients.append(PublicClient(self.clients.console, (url,), (url,), (self._front.origin,)))
        if not clients:
            return None
        cognito = boto3.client("cognito-idp", endpoint_url=endpoint, region_name=REGION)
        pool = next(iter(self._resources.user_pools.values()))
        lock = threading.Lock()

        def signed_in(client_id: str, user: str, tenant: str | None) -> dict[str, Any]:
            with lock:  # one boto3 client, several front threads
                return sign_in(cognito, pool, client_id, user, tenant)

        def refreshed(client_id: str, refresh_token: str) -> dict[str, Any]:
            with lock:
                return refresh(cognito, client_id, refresh_token)

        return LocalAuthorizationServer(tuple(clients), signed_in, refreshed)

    def start(self, api_url: str, websocket_url: str | None, upload_url: str | None = None) -> Console:
        """Write the console's config.json (the deploy-time values, local) and serve it; its CSP lets
        it connect to the API, the WebSocket API and the upload front (the documents bucket's stand-in)."""
        if self._front is None or self.clients.console is None:
            return self
        pool = next(iter(self._resources.user_pools.values()))
        config = {
            "apiUrl": api_url,
            "auth": {
                "issuer": f"https://cognito-idp.{REGION}.amazonaws.com/{pool}",
                "authorizeEndpoint": f"{api_url}/oauth2/authorize",
                "tokenEndpoint": f"{api_url}/oauth2/token",
                "logoutEndpoint": f"{api_url}/logout",
                "clientId": self.clients.console,
                "redirectUri": self._front.url,
                "scopes": list(CONSOLE_SCOPES),
            },
        }
        connect = [api_url]
        if websocket_url is not None:
            connect.append(websocket_url.removesuffix(urllib.parse.urlsplit(websocket_url).path))
        if upload_url is not None:
            connect.append(upload_url)
        self._front.configure(config, connect)
        self._front.start()
        self._serving = True
        return self

    def stop(self) -> None:
        if self._front is not None and self._serving:  # shutdown() would wait for a loop that never ran
            self._front.stop()


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
