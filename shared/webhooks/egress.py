"""The egress guard: which webhook URLs may be called, and the one checked address to call.

Run at registration and again at every send (a name can move between the two). The real
barrier is the address check: every address the name resolves to must be global, after
unwrapping the IPv6 forms that carry an IPv4 address (mapped, compatible, 6to4, Teredo,
NAT64 64:ff9b::/96), and the sender connects to the checked address itself, so a second,
different DNS answer (rebinding) never reaches the socket.

The URL checks in front of it refuse what a resolver would read differently from a URL
parser: `getaddrinfo` accepts inet_aton spellings of IPv4 (`2130706433`, `0177.0.0.1`,
`0x7f.1`, `127.1`) that `urllib.parse` and `ipaddress` take for names. Such a host is
refused outright (as the WHATWG URL standard would parse it as IPv4: a host whose last label
is a number), and only a canonical dotted quad is read as an IPv4 literal.

The special-purpose ranges are a table here, not `ipaddress.is_global`: its lists differ
between Python versions (3.11 calls 224.0.0.1 and 2002:7f00:1:: global), and the guard must
decide the same on a laptop and in Lambda. Ports: any for the local-only flag; otherwise 443
or 1024 and up, so that a URL cannot aim a TLS handshake and a POST at a well-known service
port (SMTPS 465, LDAPS 636, IMAPS 993 speak TLS too).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from urllib.parse import urlsplit

from shared.errors import EgressRefusal, EgressRefusedError

# (host, port) -> the addresses the name resolves to, as strings; raises OSError when the
# resolver cannot answer. The adapter's is getaddrinfo; tests pass a table.
Resolver = Callable[[str, int], Sequence[str]]

HTTPS_PORT = 443
HTTP_PORT = 80
LOWEST_OPEN_PORT = 1024
MAX_URL_LENGTH = 2048
LOOPBACK = "loopback"

_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]+")
_PORT = re.compile(r"[0-9]{1,5}")
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
# WHATWG "ends in a number": a last label of digits, or 0x and hex digits, makes the host IPv4.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_MAX_HOST_LENGTH = 253


def _v4(table: Sequence[tuple[str, str]]) -> tuple[tuple[IPv4Network, str], ...]:
    return tuple((IPv4Network(network), name) for network, name in table)


def _v6(table: Sequence[tuple[str, str]]) -> tuple[tuple[IPv6Network, str], ...]:
    return tuple((IPv6Network(network), name) for network, name in table)


# IANA's IPv4 Special-Purpose Address Registry (the entries not globally reachable), multicast
# and the reserved block. First match wins, so the single addresses come first.
_IPV4_SPECIAL = _v4(
    (
        ("0.0.0.0/32", "unspecified"),
        ("255.255.255.255/32", "broadcast"),
        ("0.0.0.0/8", "this-network"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared"),  # carrier-grade NAT, RFC 6598
        ("127.0.0.0/8", LOOPBACK),
        ("169.254.0.0/16", "link-local"),  # 169.254.169.254: the instance metadata service
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "ietf-protocol"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "6to4-relay"),  # deprecated anycast, RFC 7526
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
    )
)

# Checked after the IPv4-carrying forms are unwrapped. Outside 2000::/3, the only block IANA
# allocates for global unicast, everything is refused anyway ("reserved").
_IPV6_SPECIAL = _v6(
    (
        ("::/128", "unspecified"),
        ("::1/128", LOOPBACK),
        ("::/96", "ipv4-compatible"),
        ("64:ff9b:1::/48", "nat64-local"),  # local-use NAT64, RFC 8215: embedding not fixed
        ("100::/64", "discard"),
        ("2001::/32", "teredo"),
        ("2001::/23", "ietf-protocol"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),  # RFC 9637
        ("5f00::/16", "srv6"),
        ("fc00::/7", "unique-local"),  # fd00:ec2::254: the metadata service over IPv6
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    )
)
_GLOBAL_UNICAST = IPv6Network("2000::/3")
_NAT64 = IPv6Network("64:ff9b::/96")
_IPV4_BITS = 0xFFFFFFFF


@dataclass(frozen=True)
class Destination:
    """A checked webhook URL: connect to `address`, speak to `host`.

    `host` (lowercase, no brackets, no trailing dot) is what TLS sends as SNI, verifies the
    certificate against, and what the Host header names; `address` is the one checked IP
    address the connection goes to; `target` is the request target, path and query.
    """

    scheme: str
    host: str
    port: int
    target: str
    address: str

    @property
    def tls(self) -> bool:
        """True for https."""
        return self.scheme == "https"


@dataclass(frozen=True)
class _Url:
    scheme: str
    host: str
    port: int
    target: str
    literal: IPv4Address | IPv6Address | None


def check_url(url: str, resolve: Resolver, *, local_only: bool = False) -> Destination:
    """The Destination `url` may be called at, or EgressRefusedError saying why not.

    `local_only` is for local mode alone: it allows plain http, any port, and loopback
    receivers (127.0.0.0/8, ::1); every other refusal stands.
    """
    parsed = _parse(url, local_only=local_only)
    if parsed.literal is not None:
        candidates: Sequence[str] = [str(parsed.literal)]
    else:
        try:
            candidates = resolve(parsed.host, parsed.port)
        except OSError:
            raise EgressRefusedError(EgressRefusal.UNRESOLVED, "the host name does not resolve") from None
        if not candidates:
            raise EgressRefusedError(EgressRefusal.UNRESOLVED, "the host name resolves to no address")
    pinned = [_checked(candidate, local_only=local_only) for candidate in candidates]
    return Destination(parsed.scheme, parsed.host, parsed.port, parsed.target, pinned[0])


def address_class(address: IPv4Address | IPv6Address) -> str | None:
    """The special-purpose class an address falls in ("loopback", "private", ...), None if global.

    An IPv6 address that carries an IPv4 address answers for the one it carries when that one
    is not global. Mapped, NAT64 and 6to4 addresses are global exactly when the carried one
    is; IPv4-compatible (deprecated, never routed) and Teredo addresses are refused anyway.
    """
    if isinstance(address, IPv4Address):
        return _lookup(address, _IPV4_SPECIAL)
    if address.scope_id is not None:
        return "scoped"
    carried, transparent = _carried(address)
    for inner in carried:
        found = _lookup(inner, _IPV4_SPECIAL)
        if found is not None:
            return found
    if carried and transparent:
        return None
    special = _lookup(address, _IPV6_SPECIAL)
    if special is not None:
        return special
    return None if address in _GLOBAL_UNICAST else "reserved"


def _carried(address: IPv6Address) -> tuple[tuple[IPv4Address, ...], bool]:
    """The IPv4 addresses an IPv6 address carries, and whether it is global exactly when they are."""
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,), True
    if address in _NAT64:
        return (IPv4Address(int(address) & _IPV4_BITS),), True
    if address.sixtofour is not None:
        return (address.sixtofour,), True
    if address.teredo is not None:
        return address.teredo, False  # (server, client); the packets go to the client
    if 1 < int(address) <= _IPV4_BITS:  # ::a.b.c.d (:: and ::1 are not IPv4-compatible)
        return (IPv4Address(int(address)),), False
    return (), False


def _lookup(
    address: IPv4Address | IPv6Address, table: Sequence[tuple[IPv4Network | IPv6Network, str]]
) -> str | None:
    for network, name in table:
        if address in network:
            return name
    return None


def _checked(candidate: str, *, local_only: bool) -> str:
    """The address to connect to for one resolved candidate, or EgressRefusedError."""
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        raise EgressRefusedError(
            EgressRefusal.ADDRESS, "the resolver answered something that is not an IP address"
        ) from None
    found = address_class(address)
    if found is not None and not (local_only and found == LOOPBACK and _plain_loopback(address)):
        raise EgressRefusedError(
            EgressRefusal.ADDRESS,
            f"{address} is not a global address ({found})",
            address=str(address),
            address_class=found,
        )
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)  # the same host, reached without a dual-stack socket
    return str(address)


def _plain_loopback(address: IPv4Address | IPv6Address) -> bool:
    """127.0.0.0/8, ::1 or ::ffff:127.x: what local mode allows (not loopback inside NAT64 or 6to4)."""
    if isinstance(address, IPv6Address):
        address = address.ipv4_mapped or address
    return address.is_loopback


def _parse(url: str, *, local_only: bool) -> _Url:
    if len(url) > MAX_URL_LENGTH or not _VISIBLE_ASCII.fullmatch(url) or "\\" in url or "#" in url:
        # urlsplit quietly drops tabs and newlines and WHATWG reads "\" as "/": neither is allowed.
        raise EgressRefusedError(
            EgressRefusal.MALFORMED,
            f"a webhook URL is visible ASCII without backslash or fragment, at most {MAX_URL_LENGTH} long",
        )
    try:
        parts = urlsplit(url)
    except ValueError:
        raise EgressRefusedError(EgressRefusal.MALFORMED, "not a URL") from None
    allowed = ("https", "http") if local_only else ("https",)
    if parts.scheme not in allowed:
        raise EgressRefusedError(EgressRefusal.SCHEME, f"the scheme must be {' or '.join(allowed)}")
    if "@" in parts.netloc:
        raise EgressRefusedError(EgressRefusal.USERINFO, "a webhook URL carries no user name or password")
    host_text, port_text = _split_authority(parts.netloc)
    host, literal = _host(host_text)
    port = _port(port_text, parts.scheme, local_only=local_only)
    # With an authority present, urlsplit's path is empty or starts with "/".
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Url(parts.scheme, host, port, target, literal)


def _split_authority(netloc: str) -> tuple[str, str | None]:
    """(host, port text) of an authority without userinfo; brackets kept around IPv6."""
    if netloc.startswith("["):
        end = netloc.find("]")
        rest = netloc[end + 1 :] if end > 0 else ""
        if end < 0 or (rest and not rest.startswith(":")):
            raise EgressRefusedError(EgressRefusal.HOST, "a malformed IPv6 literal")
        return netloc[: end + 1], rest[1:] if rest else None
    host, colon, port = netloc.partition(":")
    return host, port if colon else None


def _port(text: str | None, scheme: str, *, local_only: bool) -> int:
    if text is None:
        return HTTPS_PORT if scheme == "https" else HTTP_PORT
    port = int(text) if _PORT.fullmatch(text) else 0
    if not 1 <= port <= 65535:
        raise EgressRefusedError(EgressRefusal.PORT, "a port is a number from 1 to 65535")
    if not local_only and port != HTTPS_PORT and port < LOWEST_OPEN_PORT:
        raise EgressRefusedError(
            EgressRefusal.PORT, f"the port must be {HTTPS_PORT} or {LOWEST_OPEN_PORT} and up"
        )
    return port


def _host(text: str) -> tuple[str, IPv4Address | IPv6Address | None]:
    """The host to name in SNI and Host, and the address it is when it is an IP literal."""
    if text.startswith("["):
        inner = text[1:-1]
        try:
            # No zone ids ("%25eth0"): only link-local addresses need them, and those are refused.
            literal = IPv6Address(inner) if "%" not in inner else None
        except ValueError:
            literal = None
        if literal is None:
            raise EgressRefusedError(EgressRefusal.HOST, "a malformed IPv6 literal")
        # [::ffff:a.b.c.d] is the IPv4 host a.b.c.d: the connection and the certificate say so.
        return str(literal.ipv4_mapped or literal), literal
    host = text.lower().removesuffix(".")
    labels = host.split(".")
    if len(host) > _MAX_HOST_LENGTH or not all(_LABEL.fullmatch(label) for label in labels):
        raise EgressRefusedError(EgressRefusal.HOST, "the host is neither a DNS name nor an IP address")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        try:
            literal4 = IPv4Address(host)
        except ValueError:
            literal4 = None
        if literal4 is None or str(literal4) != host:
            raise EgressRefusedError(
                EgressRefusal.NUMERIC_HOST, "an IPv4 address is written as four decimal numbers (a.b.c.d)"
            )
        return host, literal4
    return host, None
