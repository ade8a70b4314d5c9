"""The egress guard: every address class, IPv4 and IPv6, however spelled, directly and through DNS."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.errors import EgressRefusal, EgressRefusedError
from shared.webhooks.egress import Destination, address_class, check_url

NAME = "hooks.example.com"
GOOD_V4 = "93.184.215.14"
GOOD_V6 = "2606:2800:21f:cb07:6820:80da:af6b:8b2c"


class Dns:
    """A resolver over a table; records every question, so a test can see none was asked."""

    def __init__(self, table: dict[str, Sequence[str]] | None = None) -> None:
        self.table = table or {}
        self.asked: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append((host, port))
        return self.table.get(host, [])


class FailingDns:
    def __call__(self, host: str, port: int) -> Sequence[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def refusal(url: str, dns: object | None = None, *, local_only: bool = False) -> EgressRefusedError:
    with pytest.raises(EgressRefusedError) as raised:
        check_url(url, dns or Dns(), local_only=local_only)  # type: ignore[arg-type]
    return raised.value


def host_of(address: str) -> str:
    return f"[{address}]" if ":" in address else address


# Every class the guard refuses, with an address at the edge of its range where that tells more.
REFUSED_V4 = [
    ("0.0.0.0", "unspecified"),  # noqa: S104 - an address under test, nothing binds to it
    ("0.1.2.3", "this-network"),
    ("0.255.255.255", "this-network"),
    ("10.0.0.1", "private"),
    ("10.255.255.255", "private"),
    ("100.64.0.0", "shared"),
    ("100.127.255.255", "shared"),
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("169.254.0.1", "link-local"),
    ("169.254.169.254", "link-local"),  # the instance metadata service
    ("169.254.170.2", "link-local"),  # container credentials
    ("172.16.0.0", "private"),
    ("172.31.255.255", "private"),
    ("192.0.0.8", "ietf-protocol"),
    ("192.0.2.1", "documentation"),
    ("192.88.99.1", "6to4-relay"),
    ("192.168.0.1", "private"),
    ("192.168.255.255", "private"),
    ("198.18.0.0", "benchmarking"),
    ("198.19.255.255", "benchmarking"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.254", "reserved"),
    ("255.255.255.255", "broadcast"),
]
# Just outside the ranges above: global.
GLOBAL_V4 = [
    "1.1.1.1",
    "9.255.255.255",
    "11.0.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "126.255.255.255",
    "128.0.0.0",
    "169.253.255.255",
    "169.255.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.0.1.255",
    "192.0.3.0",
    "192.167.255.255",
    "192.169.0.0",
    "198.17.255.255",
    "198.20.0.0",
    "223.255.255.255",
    GOOD_V4,
]
REFUSED_V6 = [
    ("::", "unspecified"),
    ("::1", "loopback"),
    # IPv4-mapped: judged by the IPv4 address inside.
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:7f00:1", "loopback"),
    ("::ffff:10.0.0.1", "private"),
    ("::ffff:169.254.169.254", "link-local"),
    ("::ffff:0.0.0.0", "unspecified"),
    # IPv4-compatible (deprecated): the IPv4 inside when it is bad, refused anyway.
    ("::127.0.0.1", "loopback"),
    ("::169.254.169.254", "link-local"),
    ("::8.8.8.8", "ipv4-compatible"),
    # 6to4: 2002:AABB:CCDD::/48 carries AA.BB.CC.DD.
    ("2002:7f00:1::1", "loopback"),
    ("2002:a9fe:a9fe::", "link-local"),
    ("2002:c0a8:101::1", "private"),
    ("2002:a00:1::", "private"),
    # Teredo: the client (obfuscated) and the server; refused even when both are global.
    ("2001:0:808:808:0:0:80ff:fffe", "loopback"),  # client 127.0.0.1
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "documentation"),  # client 192.0.2.45
    ("2001:0:a00:1::fefe:fefe", "private"),  # server 10.0.0.1
    ("2001:0:808:808::fefe:fefe", "teredo"),  # server 8.8.8.8, client 1.1.1.1
    # NAT64 well-known prefix: the IPv4 address inside.
    ("64:ff9b::7f00:1", "loopback"),
    ("64:ff9b::a9fe:a9fe", "link-local"),
    ("64:ff9b::10.0.0.1", "private"),
    ("64:ff9b::100.64.0.1", "shared"),
    ("64:ff9b:1::a00:1", "nat64-local"),
    ("100::1", "discard"),
    ("2001:2::1", "ietf-protocol"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("5f00::1", "srv6"),
    ("fc00::1", "unique-local"),
    ("fd00:ec2::254", "unique-local"),  # the metadata service over IPv6
    ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique-local"),
    ("fe80::1", "link-local"),
    ("febf:ffff::1", "link-local"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("ff05::1:3", "multicast"),
    ("ff0e::1", "multicast"),
    ("::ffff:0:7f00:1", "reserved"),  # IPv4-translated, outside 2000::/3
    ("1::", "reserved"),
    ("4000::1", "reserved"),
    ("1fff:ffff::1", "reserved"),
]
GLOBAL_V6 = [
    "2606:4700:4700::1111",
    "2a00:1450:4001:81c::200e",
    "3ffe::1",
    "2001:200::1",
    "64:ff9b::808:808",  # NAT64 to 8.8.8.8
    "2002:808:808::1",  # 6to4 from 8.8.8.8
    GOOD_V6,
]
REFUSED = REFUSED_V4 + REFUSED_V6

# Spellings a resolver (inet_aton) reads as IPv4 and a URL parser takes for names.
ODD_SPELLINGS = [
    "2130706433",  # decimal 127.0.0.1
    "0x7f000001",
    "0X7F000001",
    "017700000001",  # octal
    "0177.0.0.1",
    "0x7f.0.0.1",
    "0x7f.1",
    "127.1",
    "127.0.1",
    "0177.1",
    "127.000.000.001",
    "127.0.0.01",
    "0",
    "0x0",
    "3232235777",  # 192.168.1.1
    "2852039166",  # 169.254.169.254
    "0xa9fea9fe",
    "0251.0376.0251.0376",
    "169.254.43518",
    "134744072",  # 8.8.8.8: refused as well, however harmless
    "010.8.8.8",  # inet_aton reads 8.8.8.8, a dotted-quad reader 10.8.8.8
]
NUMERIC_NOT_IPV4 = ["1.2.3.4.5", "example.123", "hooks.0x1f", "0x", "256.1.1.1", "1.2.3.256"]


class TestAddressClasses:
    @pytest.mark.parametrize(("address", "expected"), REFUSED)
    def test_a_special_address_falls_in_its_class(self, address: str, expected: str) -> None:
        assert address_class(ipaddress.ip_address(address)) == expected

    @pytest.mark.parametrize("address", GLOBAL_V4 + GLOBAL_V6)
    def test_a_global_address_has_no_class(self, address: str) -> None:
        assert address_class(ipaddress.ip_address(address)) is None

    def test_an_ipv6_address_with_a_zone_is_refused(self) -> None:
        assert address_class(ipaddress.IPv6Address("2606:4700::1%eth0")) == "scoped"

    @given(st.integers(min_value=0, max_value=2**32 - 1))
    def test_mapped_nat64_and_6to4_forms_answer_as_the_ipv4_address_inside(self, value: int) -> None:
        inner = ipaddress.IPv4Address(value)
        mapped = ipaddress.IPv6Address(0xFFFF << 32 | value)
        nat64 = ipaddress.IPv6Address(0x64FF9B << 96 | value)
        sixtofour = ipaddress.IPv6Address(0x2002 << 112 | value << 80 | 1)

        assert (
            address_class(mapped) == address_class(nat64) == address_class(sixtofour) == address_class(inner)
        )

    @given(st.integers(min_value=0, max_value=2**32 - 1))
    def test_what_the_guard_calls_global_python_does_not_call_private(self, value: int) -> None:
        address = ipaddress.IPv4Address(value)

        if address_class(address) is None:
            assert not address.is_private
            assert not address.is_multicast


class TestAddressesInUrls:
    @pytest.mark.parametrize(("address", "expected"), REFUSED)
    def test_a_literal_special_address_is_refused(self, address: str, expected: str) -> None:
        dns = Dns()

        error = refusal(f"https://{host_of(address)}/hook", dns)

        assert (error.reason, error.address_class) == (EgressRefusal.ADDRESS, expected)
        assert dns.asked == []

    @pytest.mark.parametrize(("address", "expected"), REFUSED)
    def test_a_name_resolving_to_a_special_address_is_refused(self, address: str, expected: str) -> None:
        error = refusal(f"https://{NAME}/hook", Dns({NAME: [address]}))

        assert (error.reason, error.address, error.address_class) == (
            EgressRefusal.ADDRESS,
            str(ipaddress.ip_address(address)),
            expected,
        )

    @pytest.mark.parametrize("address", GLOBAL_V4 + GLOBAL_V6)
    def test_a_name_resolving_to_a_global_address_is_pinned_to_it(self, address: str) -> None:
        destination = check_url(f"https://{NAME}/hook", Dns({NAME: [address]}))

        assert destination == Destination("https", NAME, 443, "/hook", str(ipaddress.ip_address(address)))

    @pytest.mark.parametrize("address", GLOBAL_V4 + GLOBAL_V6)
    def test_a_literal_global_address_is_its_own_host(self, address: str) -> None:
        dns = Dns()

        destination = check_url(f"https://{host_of(address)}/", dns)

        canonical = str(ipaddress.ip_address(address))
        assert (destination.host, destination.address) == (canonical, canonical)
        assert dns.asked == []

    def test_an_ipv4_mapped_answer_is_pinned_as_plain_ipv4(self) -> None:
        destination = check_url(f"https://{NAME}/", Dns({NAME: ["::ffff:93.184.215.14"]}))

        assert destination.address == GOOD_V4

    def test_an_ipv4_mapped_literal_names_the_ipv4_host(self) -> None:
        destination = check_url("https://[::ffff:93.184.215.14]/", Dns())

        assert (destination.host, destination.address) == (GOOD_V4, GOOD_V4)

    @pytest.mark.parametrize(
        "answers",
        [
            [GOOD_V4, "10.0.0.1"],
            ["10.0.0.1", GOOD_V4],
            [GOOD_V4, GOOD_V6, "::1"],
            [GOOD_V6, "fd00:ec2::254"],
            [GOOD_V4, "169.254.169.254"],
        ],
    )
    def test_one_bad_address_among_good_ones_refuses_the_name(self, answers: list[str]) -> None:
        error = refusal(f"https://{NAME}/", Dns({NAME: answers}))

        assert error.reason is EgressRefusal.ADDRESS
        assert error.address in answers

    def test_of_several_good_addresses_the_first_is_pinned(self) -> None:
        destination = check_url(f"https://{NAME}/", Dns({NAME: [GOOD_V6, GOOD_V4]}))

        assert destination.address == GOOD_V6

    def test_a_name_without_addresses_is_refused(self) -> None:
        assert refusal(f"https://{NAME}/", Dns()).reason is EgressRefusal.UNRESOLVED

    def test_a_resolver_failure_is_a_refusal_not_a_crash(self) -> None:
        assert refusal(f"https://{NAME}/", FailingDns()).reason is EgressRefusal.UNRESOLVED

    @pytest.mark.parametrize("answer", ["not-an-address", "", "127.1", "fe80::1%eth0", "2606:4700::1%eth0"])
    def test_a_resolver_answer_that_is_not_a_plain_address_is_refused(self, answer: str) -> None:
        assert refusal(f"https://{NAME}/", Dns({NAME: [answer]})).reason is EgressRefusal.ADDRESS

    def test_the_name_is_resolved_lowercased_without_its_trailing_dot_for_the_port(self) -> None:
        dns = Dns({NAME: [GOOD_V4]})

        destination = check_url("https://Hooks.EXAMPLE.com.:8443/in", dns)

        assert dns.asked == [(NAME, 8443)]
        assert (destination.host, destination.port) == (NAME, 8443)


class TestOddSpellings:
    @pytest.mark.parametrize("host", ODD_SPELLINGS)
    def test_a_resolver_would_read_it_as_ipv4(self, host: str) -> None:
        # What makes these dangerous: getaddrinfo accepts them without asking DNS.
        assert len(socket.inet_aton(host)) == 4

    @pytest.mark.parametrize("host", ODD_SPELLINGS)
    @pytest.mark.parametrize("local_only", [False, True])
    def test_an_odd_ipv4_spelling_is_refused_before_any_lookup(self, host: str, local_only: bool) -> None:
        dns = Dns({host: [GOOD_V4]})
        scheme = "http" if local_only else "https"

        error = refusal(f"{scheme}://{host}/hook", dns, local_only=local_only)

        assert error.reason is EgressRefusal.NUMERIC_HOST
        assert dns.asked == []

    @pytest.mark.parametrize("host", NUMERIC_NOT_IPV4)
    def test_a_host_ending_in_a_number_that_is_not_a_dotted_quad_is_refused(self, host: str) -> None:
        dns = Dns({host: [GOOD_V4]})

        assert refusal(f"https://{host}/", dns).reason is EgressRefusal.NUMERIC_HOST
        assert dns.asked == []

    def test_a_dotted_quad_with_a_trailing_dot_is_the_address(self) -> None:
        error = refusal("https://127.0.0.1./")

        assert (error.reason, error.address_class) == (EgressRefusal.ADDRESS, "loopback")

    def test_a_hexadecimal_looking_name_that_is_not_a_number_is_a_name(self) -> None:
        dns = Dns({"cafe.0xfood": [GOOD_V4]})

        assert check_url("https://cafe.0xfood/", dns).host == "cafe.0xfood"

    def test_a_name_that_resolves_to_loopback_is_refused_by_its_address(self) -> None:
        # The resolved-address check is the barrier: a public name can point anywhere.
        error = refusal("https://127.0.0.1.nip.io/", Dns({"127.0.0.1.nip.io": ["127.0.0.1"]}))

        assert (error.reason, error.address_class) == (EgressRefusal.ADDRESS, "loopback")


class TestUrls:
    def test_an_https_url_gives_scheme_host_port_target_and_address(self) -> None:
        destination = check_url(f"https://{NAME}/v1/hooks?tenant=acme&x=%2F", Dns({NAME: [GOOD_V4]}))

        assert destination == Destination("https", NAME, 443, "/v1/hooks?tenant=acme&x=%2F", GOOD_V4)
        assert destination.tls

    @pytest.mark.parametrize(("url", "target"), [(f"https://{NAME}", "/"), (f"https://{NAME}?a=1", "/?a=1")])
    def test_an_empty_path_is_the_root(self, url: str, target: str) -> None:
        assert check_url(url, Dns({NAME: [GOOD_V4]})).target == target

    def test_the_scheme_matches_in_any_case(self) -> None:
        assert check_url(f"HTTPS://{NAME}/", Dns({NAME: [GOOD_V4]})).scheme == "https"

    @pytest.mark.parametrize(
        "url",
        [
            f"http://{NAME}/",
            f"ftp://{NAME}/",
            f"file://{NAME}/etc/passwd",
            f"gopher://{NAME}/",
            f"//{NAME}/",
            NAME,
        ],
    )
    def test_anything_but_https_is_refused(self, url: str) -> None:
        assert refusal(url, Dns({NAME: [GOOD_V4]})).reason is EgressRefusal.SCHEME

    @pytest.mark.parametrize(
        "url",
        [
            f"https://user@{NAME}/",
            f"https://user:secret@{NAME}/",
            f"https://@{NAME}/",
            f"https://:@{NAME}/",
            f"https://{NAME}@evil.example.net/",
            f"https://{NAME}:443@127.0.0.1/",
        ],
    )
    def test_userinfo_is_refused(self, url: str) -> None:
        assert refusal(url, Dns({NAME: [GOOD_V4]})).reason is EgressRefusal.USERINFO

    @pytest.mark.parametrize(
        "url",
        [
            f"https://{NAME}/a b",
            f"https://{NAME}/\tx",
            f"https://{NAME}\n.evil/",
            f" https://{NAME}/",
            f"https://{NAME}/\x00",
            f"https://evil.example.net\\@{NAME}/",
            f"https://{NAME}/#fragment",
            f"https://{NAME}/#",
            "https://exämple.com/",
            f"https://{NAME}/" + "a" * 2048,
            "https://[::1/",
        ],
    )
    def test_a_url_a_parser_and_a_resolver_could_read_differently_is_refused(self, url: str) -> None:
        assert refusal(url, Dns({NAME: [GOOD_V4]})).reason is EgressRefusal.MALFORMED

    @pytest.mark.parametrize(
        "url",
        [
            "https:hooks.example.com/",
            "https:///hook",
            "https://a..b/",
            "https://.example.com/",
            "https://-a.example.com/",
            "https://a-.example.com/",
            "https://%31%32%37.0.0.1/",
            "https://" + "a" * 64 + ".example.com/",
            "https://" + ".".join(["a" * 60] * 5) + "/",
            "https://::1/",
            "https://[fe80::1%25eth0]/",
            "https://[::1]x/",
        ],
    )
    def test_a_host_that_is_neither_a_name_nor_an_ip_literal_is_refused(self, url: str) -> None:
        assert refusal(url, Dns({NAME: [GOOD_V4]})).reason is EgressRefusal.HOST

    @pytest.mark.parametrize("url", ["https://[127.0.0.1]/", "https://[]/", "https://[v1.x]/"])
    def test_brackets_around_anything_but_ipv6_are_refused(self, url: str) -> None:
        # Python's urlsplit checks bracketed hosts itself in recent patch releases (MALFORMED);
        # where it does not, the guard's own check does (HOST).
        assert refusal(url, Dns()).reason in {EgressRefusal.MALFORMED, EgressRefusal.HOST}

    @pytest.mark.parametrize("port", ["443", "1024", "8443", "65535"])
    def test_https_may_use_443_or_an_unprivileged_port(self, port: str) -> None:
        assert check_url(f"https://{NAME}:{port}/", Dns({NAME: [GOOD_V4]})).port == int(port)

    @pytest.mark.parametrize(
        "port", ["0", "22", "25", "80", "465", "636", "993", "1023", "65536", "99999", "", "x"]
    )
    def test_other_ports_are_refused(self, port: str) -> None:
        assert refusal(f"https://{NAME}:{port}/", Dns({NAME: [GOOD_V4]})).reason is EgressRefusal.PORT

    def test_an_ipv6_literal_with_a_port(self) -> None:
        destination = check_url(f"https://[{GOOD_V6}]:8443/x", Dns())

        assert (destination.host, destination.port, destination.address) == (GOOD_V6, 8443, GOOD_V6)


class TestLocalOnly:
    @pytest.mark.parametrize(
        ("url", "address"),
        [
            ("http://127.0.0.1:8123/hook", "127.0.0.1"),
            ("http://127.0.0.2/hook", "127.0.0.2"),
            ("http://[::1]:8123/hook", "::1"),
            ("https://127.0.0.1:22/", "127.0.0.1"),
            ("http://[::ffff:127.0.0.1]:8123/", "127.0.0.1"),
        ],
    )
    def test_plain_http_any_port_and_loopback_are_allowed(self, url: str, address: str) -> None:
        assert check_url(url, Dns(), local_only=True).address == address

    def test_localhost_resolving_to_both_loopbacks_is_allowed(self) -> None:
        destination = check_url(
            "http://localhost:8123/h", Dns({"localhost": ["127.0.0.1", "::1"]}), local_only=True
        )

        assert destination == Destination("http", "localhost", 8123, "/h", "127.0.0.1")
        assert not destination.tls

    def test_http_defaults_to_port_80(self) -> None:
        assert check_url("http://127.0.0.1/", Dns(), local_only=True).port == 80

    @pytest.mark.parametrize(("address", "expected"), [(a, c) for a, c in REFUSED if c != "loopback"])
    def test_every_other_class_is_still_refused(self, address: str, expected: str) -> None:
        error = refusal(f"http://{NAME}/", Dns({NAME: [address]}), local_only=True)

        assert (error.reason, error.address_class) == (EgressRefusal.ADDRESS, expected)

    @pytest.mark.parametrize(
        "address", ["::127.0.0.1", "2002:7f00:1::1", "2001:0:808:808:0:0:80ff:fffe", "64:ff9b::7f00:1"]
    )
    def test_loopback_inside_a_routed_ipv6_form_is_not_loopback_here(self, address: str) -> None:
        # These go to a relay or a NAT64 gateway, not to this machine: local mode allows no more.
        error = refusal(f"http://[{address}]/", local_only=True)

        assert (error.reason, error.address_class) == (EgressRefusal.ADDRESS, "loopback")

    def test_userinfo_is_refused_in_local_mode_too(self) -> None:
        assert refusal("http://u:p@127.0.0.1/", local_only=True).reason is EgressRefusal.USERINFO

    def test_other_schemes_stay_refused(self) -> None:
        assert refusal("ftp://127.0.0.1/", local_only=True).reason is EgressRefusal.SCHEME
