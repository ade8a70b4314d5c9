"""A person signing in, played by the test: what the browser does with `outlast login`'s URL.

`browser(user, tenant)` stands in for `webbrowser.open`: in a thread of its own (the CLI is
waiting on its loopback port meanwhile) it opens the authorize URL, fills the sign-in form (the
local front's: user name and tenant), posts it, and follows the redirect back to the CLI's
loopback callback, as a browser would.
"""

from __future__ import annotations

import html
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: object, **__: object) -> None:
        return None


@dataclass
class Browser:
    """What the browser saw: each callback's answer status, and any failure."""

    user: str
    tenant: str | None = None
    callback_statuses: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    before_callback: Callable[[str], None] | None = None  # sees the callback URL first
    done: threading.Event = field(default_factory=threading.Event)

    def open(self, url: str, *_: object, **__: object) -> bool:
        """`webbrowser.open`: sign in, in the background."""
        threading.Thread(target=self._sign_in, args=(url,), daemon=True).start()
        return True

    def _sign_in(self, url: str) -> None:
        try:
            self._walk(url)
        except (OSError, ValueError, AssertionError) as error:
            self.failures.append(repr(error))
        finally:
            self.done.set()

    def _walk(self, url: str) -> None:
        opener = urllib.request.build_opener(_NoRedirect)
        with opener.open(url, timeout=30) as page:
            form = {name: html.unescape(value) for name, value in _HIDDEN.findall(page.read().decode())}
        form.update({"username": self.user, "tenant": self.tenant or ""})
        action = urllib.parse.urljoin(url, "/oauth2/authorize")
        data = urllib.parse.urlencode(form).encode()
        request = urllib.request.Request(action, data=data, method="POST")  # noqa: S310 - http(s) only
        try:
            opener.open(request, timeout=30)
        except urllib.error.HTTPError as redirect:
            status, callback = redirect.code, redirect.headers["Location"]
        else:
            status, callback = 200, None
        if status != 302 or callback is None:
            raise AssertionError(f"the sign-in form answered {status}, not a redirect")
        if self.before_callback is not None:
            self.before_callback(callback)
        try:
            with opener.open(callback, timeout=30) as answer:
                self.callback_statuses.append(answer.status)
        except urllib.error.HTTPError as refused:
            self.callback_statuses.append(refused.code)
