"""Node URLs have one spelling (domain/urls.py): every way of writing the same URL is stored and
compared as one, so nobody can register another provider's node by spelling it differently."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.urls import normalise_url, refuse_userinfo, url_identity


@pytest.mark.parametrize(
    "spelling",
    [
        "http://node.example:8545/",
        "http://node.example:8545",
        "HTTP://Node.Example:8545",
        "http://NODE.EXAMPLE:8545/#fragment",
    ],
)
def test_spellings_of_one_url_have_one_normal_form(spelling: str) -> None:
    assert normalise_url(spelling) == "http://node.example:8545/"


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("https://node.example:443/v1", "https://node.example/v1"),
        ("http://node.example:80", "http://node.example/"),
        ("wss://node.example:443/ws", "wss://node.example/ws"),
        ("ws://node.example:80/", "ws://node.example/"),
        ("https://node.example:8443/", "https://node.example:8443/"),
        ("https://node.example/%7euser/%41%2f", "https://node.example/~user/A%2F"),
        ("https://node.example/?key=%7e%2a", "https://node.example/?key=~%2A"),
        ("http://[::1]:8545", "http://[::1]:8545/"),
        ("https://User:Pa%20ss@Node.Example/", "https://User:Pa%20ss@node.example/"),
        ("https://node.example/v1/", "https://node.example/v1/"),  # not the same as /v1
    ],
)
def test_default_ports_escapes_and_credentials(url: str, normal: str) -> None:
    assert normalise_url(url) == normal


@pytest.mark.parametrize(
    ("spelling", "normal"),
    [
        ("http://127.0.0.1:8545/./", "http://127.0.0.1:8545/"),
        ("http://127.0.0.1:8545/a/../", "http://127.0.0.1:8545/"),
        ("http://127.0.0.1:8545/%2E/", "http://127.0.0.1:8545/"),
        ("http://[::ffff:127.0.0.1]:8545/", "http://127.0.0.1:8545/"),
        ("http://127.1:8545/", "http://127.0.0.1:8545/"),  # as the resolver reads it
        ("http://0x7f.0.0.1:8545/", "http://127.0.0.1:8545/"),
        ("http://0177.0.0.1:8545/", "http://127.0.0.1:8545/"),
        ("http://2130706433:8545/", "http://127.0.0.1:8545/"),
        ("http://127.0.0.1.:8545/", "http://127.0.0.1:8545/"),
        ("http://[2001:db8:0:0::1]:8545/", "http://[2001:db8::1]:8545/"),
        ("http://[2001:DB8::1]:8545/", "http://[2001:db8::1]:8545/"),
        ("https://node.example./v1", "https://node.example/v1"),
        ("https://\uff4e\uff4f\uff44\uff45.example/v1", "https://node.example/v1"),
        ("https://b\u00fccher.example/", "https://xn--bcher-kva.example/"),
        ("http://stra\u00dfe.de/", "http://xn--strae-oqa.de/"),  # IDNA 2008, as the client
        ("http://xn--strae-oqa.de/", "http://xn--strae-oqa.de/"),
    ],
)
def test_spellings_the_client_dials_alike_are_one_url(spelling: str, normal: str) -> None:
    """Dot segments, IPv6, IPv4-mapped and shorthand IPv4 forms, a trailing dot, full-width or
    other internationalised hosts: the client dials each the same as its normal form, so another
    provider could otherwise claim a node by writing its URL so."""
    assert normalise_url(spelling) == normal


@pytest.mark.parametrize(
    "url",
    [
        "https://a..b/",
        f"https://{'a' * 64}.example/",
        "https://./",
        "https://exa mple.com/",
        "https://a%20b.example/",
        'https://a"b.example/',
        "https://a<b>.example/",
        "http://a;b.example:8545/",
    ],
)
def test_a_host_that_is_no_host_name_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="host"):
        normalise_url(url)


@pytest.mark.parametrize(
    "url", ["ftp://node.example/", "node.example", "http://", "http://node.example:99999/"]
)
def test_what_is_not_a_node_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - any reason: it is not a node URL
        normalise_url(url)


hosts = st.from_regex(r"[a-zA-Z][a-zA-Z0-9-]{0,10}(\.[a-zA-Z]{2,5}){1,2}", fullmatch=True)
paths = st.lists(
    st.text("abcXYZ019-._~%20", min_size=1, max_size=6).map(lambda s: s.replace("%", "%25")),
    max_size=3,
).map(lambda segments: "/" + "/".join(segments) if segments else "")


@given(
    st.sampled_from(["http", "https", "ws", "wss", "HTTPS"]),
    hosts,
    st.none() | st.integers(1, 65535),
    paths,
)
def test_the_normal_form_is_its_own_normal_form(
    scheme: str, host: str, port: int | None, path: str
) -> None:
    url = f"{scheme}://{host}{'' if port is None else f':{port}'}{path}"
    normal = normalise_url(url)
    assert normalise_url(normal) == normal
    assert normal == normal.strip()
    assert (
        normal.split("://", 1)[1].split("/", 1)[0]
        == normal.split("://", 1)[1].split("/", 1)[0].lower()
        or "@" in normal
    )


@pytest.mark.parametrize(
    "spelling",
    [
        "http://node.example:8545/",
        "http://node.example:8545/?mine",
        "http://node.example:8545/?apikey=x&b=1",
        "http://user:secret@node.example:8545/?q#f",
        "HTTP://Node.Example:8545?mine",
    ],
)
def test_a_query_or_credentials_do_not_make_another_node(spelling: str) -> None:
    assert url_identity(normalise_url(spelling)) == "http://node.example:8545/"


@given(
    query=st.text(alphabet="abcdefghij=&%20", max_size=12),
    path=st.sampled_from(["/", "/v1", "/v1/", "/a/b"]),
)
def test_the_identity_is_the_normal_form_without_its_query(query: str, path: str) -> None:
    url = normalise_url(f"https://node.example{path}?{query}")
    identity = url_identity(url)
    assert identity == normalise_url(f"https://node.example{path}")
    assert url.startswith(identity)
    assert url_identity(identity) == identity


def test_credentials_in_a_providers_node_url_are_refused() -> None:
    with pytest.raises(ValueError, match="credentials"):
        refuse_userinfo("https://user:pass@node.example/")
    assert refuse_userinfo("https://node.example/?key=a@b") == "https://node.example/?key=a@b"
