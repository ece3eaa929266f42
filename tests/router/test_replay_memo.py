"""The replay memo (`native/src/replay.rs`, `chainrouter._native.ReplayMemo`) as rules over random
requests: a request that differs from one the pipeline answered only in the values of its calls'
`id` members is answered again with the same answer under the new ids; anything else is not.

Requests are random JSON-RPC calls and batches (random methods, nested params that themselves
hold `id` members, ids of every kind the pipeline accepts), written by orjson, by `json.dumps`
with random indents and separators, or by hand with random whitespace and escapes. The pipeline's
own parser (`parse_payload`) says which id each call has and how it is echoed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from chainrouter.jsonrpc.envelope import RpcCall, parse_payload
from chainrouter.router.executors.native import load_native_module

NATIVE = load_native_module()
PREFIX = "c0ffee-r"
MAX_BODY_BYTES = 1 << 20
RULES = settings(max_examples=200, deadline=None)

Span = tuple[int, int]
Header = tuple[str, str]
Replayed = tuple[int, list[Header], bytes]


# --- The memo, typed ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Asked:
    """What a replay is keyed by besides the body."""

    path: str = "/rpc/1/crk_test"
    origin: str | None = "https://app.example"
    referer: str | None = None
    content_type: str | None = "application/json"


class Memo:
    def __init__(self, max_bytes: int = 1 << 26, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.native = NATIVE.ReplayMemo(max_bytes, max_body_bytes, 3600.0, PREFIX)

    def install(
        self,
        token: int,
        asked: Asked,
        body: bytes,
        answer: bytes,
        status: int = 200,
        headers: Sequence[Header] = (),
    ) -> bool:
        installed: bool = self.native.install(
            token,
            self.native.generation(),  # decided now: nothing cleared the memo meanwhile
            asked.path,
            asked.origin,
            asked.referer,
            asked.content_type,
            body,
            status,
            list(headers),
            answer,
        )
        return installed

    def replay(self, asked: Asked, body: bytes) -> Replayed | None:
        replayed: Replayed | None = self.native.replay(
            asked.path, asked.origin, asked.referer, asked.content_type, body
        )
        return replayed

    def drain(self) -> tuple[list[tuple[int, int]], list[int]]:
        counts: list[tuple[int, int]]
        gone: list[int]
        counts, gone = self.native.drain()
        return counts, gone

    def clear(self) -> None:
        self.native.clear()

    def stats(self) -> tuple[int, int]:
        entries: int
        size: int
        entries, size = self.native.stats()
        return entries, size


def scan(body: bytes) -> list[Span] | None:
    spans: list[Span] | None = NATIVE.ReplayMemo.scan_ids(body)
    return spans


# --- Requests -------------------------------------------------------------------------------------

NAMES = st.one_of(
    st.sampled_from(["id", "jsonrpc", "method", "params", "result"]), st.text(max_size=8)
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(NAMES, inner, max_size=4)),
    max_leaves=12,
)
PARAMS = st.one_of(
    st.lists(JSON_VALUES, max_size=4), st.dictionaries(NAMES, JSON_VALUES, max_size=4)
)
METHODS = st.one_of(
    st.sampled_from(["eth_chainId", "eth_call", "eth_getBalance"]), st.text(min_size=1, max_size=16)
)

PLAIN_CHARS = "".join(chr(code) for code in range(0x20, 0x7F) if chr(code) not in '"\\')
PLAIN_IDS = st.one_of(
    st.none(), st.integers(-(10**18) + 1, 10**18 - 1), st.text(PLAIN_CHARS, max_size=64)
)
ANY_IDS = st.one_of(
    PLAIN_IDS,
    st.integers(-(2**63), 2**63 - 1),
    st.text(),
    st.text(PLAIN_CHARS, min_size=60, max_size=70),
)


def is_plain(value: Any) -> bool:
    """An id the memo replays: an int of at most 18 digits, null, or a short printable ASCII
    string without `"` or `\\` (each written by orjson exactly as a caller writes it)."""
    if value is None:
        return True
    if type(value) is int:
        return abs(value) < 10**18
    if type(value) is str:
        return len(value) <= 64 and all(char in PLAIN_CHARS for char in value)
    return False


def same_id(left: Any, right: Any) -> bool:
    return type(left) is type(right) and left == right


@st.composite
def calls(draw: st.DrawFn, ids: st.SearchStrategy[Any]) -> dict[str, Any]:
    members: dict[str, Any] = {"jsonrpc": "2.0", "method": draw(METHODS), "id": draw(ids)}
    if draw(st.booleans()):
        members["params"] = draw(PARAMS)
    order = draw(st.permutations(list(members)))
    return {name: members[name] for name in order}


def requests(ids: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """One call (a dict) or a batch (a list of them)."""
    return st.one_of(calls(ids), st.lists(calls(ids), min_size=1, max_size=4))


def calls_of(request: Any) -> list[dict[str, Any]]:
    return list(request) if isinstance(request, list) else [request]


def ids_of(request: Any) -> list[Any]:
    return [call["id"] for call in calls_of(request)]


def with_ids(request: Any, ids: Sequence[Any]) -> Any:
    """`request` with other ids, every member in its place."""
    renamed = [{**call, "id": id_} for call, id_ in zip(calls_of(request), ids, strict=True)]
    return renamed if isinstance(request, list) else renamed[0]


def answer_to(request: Any, results: Sequence[Any]) -> Any:
    """What the pipeline answers: each call's result under its id, in the request's order."""
    answers = [
        {"jsonrpc": "2.0", "id": call["id"], "result": result}
        for call, result in zip(calls_of(request), results, strict=True)
    ]
    return answers if isinstance(request, list) else answers[0]


def echoed_ids(body: bytes) -> list[bytes]:
    """Each call's id as the pipeline writes it in its answer."""
    echoed = []
    for call in parse_payload(body, max_batch=100).calls:
        assert isinstance(call, RpcCall)
        echoed.append(call.id_json)
    return echoed


# --- How a request is written ---------------------------------------------------------------------

WHITESPACE = " \t\n\r"
SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def unicode_escape(char: str, upper: bool) -> str:
    code = ord(char)
    units = (
        [code] if code <= 0xFFFF else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + (code & 0x3FF)]
    )
    return "".join(f"\\u{unit:04X}" if upper else f"\\u{unit:04x}" for unit in units)


@dataclass(frozen=True, slots=True)
class Layout:
    """How a request is written: by orjson, by `json.dumps`, or by hand with random whitespace
    around every token and, if `escapes`, random escapes in strings (and, if `escape_names`, in
    the calls' own member names). A call's id value is always written as orjson writes it, and by
    hand without drawing from the random sequence: a request written again with other ids
    differs from the first in its ids alone."""

    kind: Literal["orjson", "json", "hand"]
    indent: int | str | None = None
    separators: tuple[str, str] | None = None
    ensure_ascii: bool = True
    seed: int = 0
    escapes: bool = False
    escape_names: bool = False

    def encode(self, request: Any) -> bytes:
        if self.kind == "orjson":
            return orjson.dumps(request)
        if self.kind == "json":
            text = json.dumps(
                request,
                indent=self.indent,
                separators=self.separators,
                ensure_ascii=self.ensure_ascii,
            )
            return text.encode()
        return HandWriter(self).request(request).encode()

    @property
    def plain_names(self) -> bool:
        """Whether the calls' member names are written without escapes."""
        return self.kind != "hand" or not self.escape_names


class HandWriter:
    def __init__(self, layout: Layout) -> None:
        self.random = random.Random(layout.seed)
        self.escapes = layout.escapes
        self.escape_names = layout.escape_names

    def space(self) -> str:
        count = self.random.choice((0, 0, 0, 1, 2))
        return "".join(self.random.choice(WHITESPACE) for _ in range(count))

    def string(self, text: str, escapes: bool) -> str:
        out = ['"']
        for char in text:
            if escapes and self.random.random() < 0.2:
                if char == "/" and self.random.random() < 0.5:
                    out.append("\\/")
                else:
                    out.append(unicode_escape(char, upper=self.random.random() < 0.5))
            elif char in SHORT_ESCAPES:
                out.append(SHORT_ESCAPES[char])
            elif ord(char) < 0x20:
                out.append(unicode_escape(char, upper=False))
            else:
                out.append(char)
        out.append('"')
        return "".join(out)

    def value(self, value: Any) -> str:
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            # orjson writes 1e16, the standard library 1e+16: both are JSON.
            return json.dumps(value) if self.random.random() < 0.5 else orjson.dumps(value).decode()
        if isinstance(value, str):
            return self.string(value, self.escapes)
        if isinstance(value, list):
            return self.sequence("[", [self.value(item) for item in value], "]")
        assert isinstance(value, dict)
        members = [
            self.member(name, self.escapes, self.value(item)) for name, item in value.items()
        ]
        return self.sequence("{", members, "}")

    def member(self, name: str, escapes: bool, value: str) -> str:
        return self.string(name, escapes) + self.space() + ":" + self.space() + value

    def sequence(self, opening: str, items: list[str], closing: str) -> str:
        inside = (self.space() + "," + self.space()).join(items)
        return opening + self.space() + inside + self.space() + closing

    def call(self, call: dict[str, Any]) -> str:
        members = []
        for name, value in call.items():
            written = orjson.dumps(value).decode() if name == "id" else self.value(value)
            members.append(self.member(name, self.escape_names, written))
        return self.sequence("{", members, "}")

    def request(self, request: Any) -> str:
        if isinstance(request, list):
            body = self.sequence("[", [self.call(call) for call in request], "]")
        else:
            body = self.call(request)
        return self.space() + body + self.space()


SOME_WHITESPACE = st.text(WHITESPACE, max_size=2)
JSON_DUMPS_LAYOUTS = st.builds(
    Layout,
    kind=st.just("json"),
    indent=st.one_of(st.none(), st.integers(0, 4), SOME_WHITESPACE),
    separators=st.one_of(
        st.none(),
        st.tuples(SOME_WHITESPACE, SOME_WHITESPACE, SOME_WHITESPACE, SOME_WHITESPACE).map(
            lambda w: (w[0] + "," + w[1], w[2] + ":" + w[3])
        ),
    ),
    ensure_ascii=st.booleans(),
)


def layouts(escape_names: bool = True) -> st.SearchStrategy[Layout]:
    hand = st.builds(
        Layout,
        kind=st.just("hand"),
        seed=st.integers(0, 2**32),
        escapes=st.booleans(),
        escape_names=st.booleans() if escape_names else st.just(False),
    )
    return st.one_of(st.just(Layout("orjson")), JSON_DUMPS_LAYOUTS, hand)


# --- Requests' other fields and answers' headers --------------------------------------------------

OPTIONAL_TEXT = st.one_of(st.none(), st.text(max_size=20))
PATHS = st.text(max_size=20).map(lambda rest: "/rpc/" + rest)
ASKED = st.builds(
    Asked, path=PATHS, origin=OPTIONAL_TEXT, referer=OPTIONAL_TEXT, content_type=OPTIONAL_TEXT
)
HEADER_NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True).filter(
    lambda name: name != "x-batch-id"
)
HEADER_VALUES = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=20)
HEADERS = st.lists(st.tuples(HEADER_NAMES, HEADER_VALUES), max_size=4)
STATUSES = st.integers(100, 599)


def by_name(headers: Iterable[Header]) -> list[Header]:
    """Headers in name order, each name's values in their order (as a header map keeps them)."""
    return sorted(headers, key=lambda header: header[0])


# --- 1. The ids found are the calls' ids, as the pipeline echoes them -----------------------------


@RULES
@given(request=requests(ANY_IDS), layout=layouts())
def test_the_spans_found_are_the_calls_ids_written_as_the_pipeline_echoes_them(
    request: Any, layout: Layout
) -> None:
    body = layout.encode(request)
    parsed = calls_of(orjson.loads(body))
    spans = scan(body)
    if spans is None:
        every_id_plain = all(is_plain(id_) for id_ in ids_of(request))
        assert not (every_id_plain and layout.plain_names), "a request of plain ids is scanned"
        return
    assert len(spans) == len(parsed)
    for (start, end), call, echoed in zip(spans, parsed, echoed_ids(body), strict=True):
        text = body[start:end]
        assert same_id(orjson.loads(text), call["id"])
        assert orjson.dumps(call["id"]) == text  # echoed byte for byte
        assert echoed == text
        assert is_plain(call["id"])


def spellings(value: Any) -> list[str]:
    """Ways to write `value` in JSON (the first is orjson's), and JSON that is no id at all."""
    written = orjson.dumps(value).decode()
    if value is None:
        return [written, "false", "[]", "{}", '{"id":null}', "[null]"]
    if isinstance(value, int):
        alternatives = [f"{value}.0", f"{value}e0", f"{value}E+00", f"{value}.00e-0"]
        if value == 0:
            alternatives.append("-0")
        return [written, *alternatives, f"[{value}]", f'{{"id":{value}}}', "true"]
    alternatives = [json.dumps(value, ensure_ascii=True), written.replace("/", "\\/")]
    alternatives += [
        orjson.dumps(value[:at]).decode()[:-1]
        + unicode_escape(char, upper=False)
        + orjson.dumps(value[at + 1 :]).decode()[1:]
        for at, char in enumerate(value)
    ]
    return [written, *alternatives, f"[{written}]"]


@RULES
@given(
    value=ANY_IDS,
    choice=st.integers(0, 20),
    before=st.sampled_from(['"jsonrpc":"2.0","method":"m",', "", '"params":[{"id":5}],']),
)
@example(value=0, choice=5, before="")  # -0
@example(value="a/b", choice=2, before="")  # "a\/b"
@example(value=-123, choice=0, before="")
def test_an_id_is_found_only_when_plain_and_written_as_orjson_writes_it(
    value: Any, choice: int, before: str
) -> None:
    options = spellings(value)
    spelling = options[choice % len(options)]
    body = ("{" + before + '"id":' + spelling + "}").encode()
    spans = scan(body)
    canonical = spelling == orjson.dumps(value).decode()
    if canonical and is_plain(value):
        assert spans is not None
    if spans is not None:
        [(start, end)] = spans
        assert body[start:end] == spelling.encode()
        assert canonical
        assert is_plain(value)
        assert orjson.dumps(orjson.loads(body)["id"]) == spelling.encode()


# --- 2. A replay is the answer given again --------------------------------------------------------


@RULES
@given(
    request=requests(PLAIN_IDS),
    layout=layouts(escape_names=False),
    asked=ASKED,
    status=STATUSES,
    headers=HEADERS,
    data=st.data(),
)
def test_a_replay_is_the_answer_given_again_under_the_new_ids(
    request: Any,
    layout: Layout,
    asked: Asked,
    status: int,
    headers: list[Header],
    data: st.DataObject,
) -> None:
    count = len(calls_of(request))
    results = data.draw(st.lists(JSON_VALUES, min_size=count, max_size=count))
    new_ids = data.draw(st.lists(PLAIN_IDS, min_size=count, max_size=count))
    memo = Memo()
    first = layout.encode(request)
    assert echoed_ids(first) == [orjson.dumps(id_) for id_ in ids_of(request)]
    answer = orjson.dumps(answer_to(request, results))
    assert memo.install(7, asked, first, answer, status, headers)

    again = with_ids(request, new_ids)
    replayed = memo.replay(asked, layout.encode(again))

    assert replayed is not None
    replayed_status, replayed_headers, replayed_body = replayed
    assert replayed_status == status
    batch_ids = [value for name, value in replayed_headers if name == "x-batch-id"]
    assert len(batch_ids) == 1
    assert batch_ids[0].startswith(PREFIX)
    others = [header for header in replayed_headers if header[0] != "x-batch-id"]
    assert by_name(others) == by_name(headers)
    expected = answer_to(again, results)
    assert orjson.loads(replayed_body) == expected
    assert replayed_body == orjson.dumps(expected)
    assert echoed_ids(layout.encode(again)) == [
        orjson.dumps(answered["id"]) for answered in calls_of(expected)
    ]
    assert memo.drain() == ([(7, 1)], [])


@RULES
@given(request=requests(PLAIN_IDS), layout=layouts(escape_names=False), replays=st.integers(2, 5))
def test_each_replay_has_a_batch_id_of_its_own(request: Any, layout: Layout, replays: int) -> None:
    memo = Memo()
    body = layout.encode(request)
    answer = orjson.dumps(answer_to(request, [None] * len(calls_of(request))))
    assert memo.install(1, Asked(), body, answer)
    batch_ids = []
    for _ in range(replays):
        replayed = memo.replay(Asked(), body)
        assert replayed is not None
        batch_ids += [value for name, value in replayed[1] if name == "x-batch-id"]
    assert len(set(batch_ids)) == replays
    assert all(batch_id.startswith(PREFIX) for batch_id in batch_ids)


@RULES
@given(request=requests(PLAIN_IDS), layout=layouts(escape_names=False), data=st.data())
def test_an_answer_under_ids_other_than_the_requests_is_not_kept(
    request: Any, layout: Layout, data: st.DataObject
) -> None:
    count = len(calls_of(request))
    answered_ids = data.draw(st.lists(PLAIN_IDS, min_size=count, max_size=count))
    original = [orjson.dumps(id_) for id_ in ids_of(request)]
    answered = [orjson.dumps(id_) for id_ in answered_ids]
    memo = Memo()
    body = layout.encode(request)
    answer = orjson.dumps(answer_to(with_ids(request, answered_ids), [1] * count))

    installed = memo.install(1, Asked(), body, answer)

    assert installed == (answered == original)
    assert memo.stats()[0] == (1 if installed else 0)


# --- 3. Anything but the ids differing is not a replay --------------------------------------------

FIELDS = ("path", "origin", "referer", "content_type")


@RULES
@given(
    request=requests(PLAIN_IDS),
    layout=layouts(escape_names=False),
    asked=ASKED,
    field=st.sampled_from(FIELDS),
    data=st.data(),
)
def test_a_request_to_another_path_or_with_another_origin_referer_or_content_type_is_no_replay(
    request: Any, layout: Layout, asked: Asked, field: str, data: st.DataObject
) -> None:
    if field == "path":
        other = replace(asked, path=data.draw(PATHS))
    elif field == "origin":
        other = replace(asked, origin=data.draw(OPTIONAL_TEXT))
    elif field == "referer":
        other = replace(asked, referer=data.draw(OPTIONAL_TEXT))
    else:
        other = replace(asked, content_type=data.draw(OPTIONAL_TEXT))
    memo = Memo()
    body = layout.encode(request)
    answer = orjson.dumps(answer_to(request, ["0x1"] * len(calls_of(request))))
    assert memo.install(1, asked, body, answer)
    count = len(calls_of(request))
    again = layout.encode(
        with_ids(request, data.draw(st.lists(PLAIN_IDS, min_size=count, max_size=count)))
    )

    assert (memo.replay(other, again) is not None) == (other == asked)
    assert memo.replay(asked, again) is not None


@st.composite
def mutations(draw: st.DrawFn, request: Any) -> Any:
    """`request` with something other than an id changed (or, rarely, changed back)."""
    batch = calls_of(request)
    index = draw(st.integers(0, len(batch) - 1))
    call = dict(batch[index])
    kind = draw(
        st.sampled_from(
            [
                "method",
                "params",
                "no params",
                "jsonrpc",
                "order",
                "drop",
                "repeat",
                "unwrap",
                "wrap",
            ]
        )
    )
    if kind == "method":
        call["method"] = draw(METHODS)
    elif kind == "params":
        call["params"] = draw(PARAMS)
    elif kind == "no params":
        call.pop("params", None)
    elif kind == "jsonrpc":
        call["jsonrpc"] = draw(st.sampled_from(["2.0", "2", "1.0"]))
    elif kind == "order":
        call = {name: call[name] for name in draw(st.permutations(list(call)))}
    elif kind == "drop" and len(batch) > 1:
        return batch[:index] + batch[index + 1 :]
    elif kind == "repeat":
        return [*batch[: index + 1], call, *batch[index + 1 :]]
    elif kind == "unwrap":
        return call
    elif kind == "wrap" and isinstance(request, dict):
        return [request]
    changed = [*batch[:index], call, *batch[index + 1 :]]
    return changed if isinstance(request, list) else changed[0]


@RULES
@given(request=requests(PLAIN_IDS), layout=layouts(escape_names=False), data=st.data())
def test_a_request_with_other_methods_params_or_calls_is_no_replay(
    request: Any, layout: Layout, data: st.DataObject
) -> None:
    memo = Memo()
    body = layout.encode(request)
    answer = orjson.dumps(answer_to(request, ["0x1"] * len(calls_of(request))))
    assert memo.install(1, Asked(), body, answer)
    mutated = data.draw(mutations(request))
    count = len(calls_of(mutated))
    new_ids = data.draw(st.lists(PLAIN_IDS, min_size=count, max_size=count))

    replayed = memo.replay(Asked(), layout.encode(with_ids(mutated, new_ids)))

    # Written with the first ids, the changed request is the first byte for byte, or no replay.
    assert (replayed is not None) == (layout.encode(mutated) == body)


@RULES
@given(
    request=requests(PLAIN_IDS),
    layout=layouts(escape_names=False),
    edit=st.sampled_from(["space", "insert", "replace", "delete"]),
    byte=st.integers(0, 255),
    where=st.integers(0, 2**32),
)
def test_a_byte_changed_added_or_removed_outside_the_ids_makes_a_request_no_replay(
    request: Any, layout: Layout, edit: str, byte: int, where: int
) -> None:
    memo = Memo()
    body = layout.encode(request)
    answer = orjson.dumps(answer_to(request, ["0x1"] * len(calls_of(request))))
    assert memo.install(1, Asked(), body, answer)
    spans = scan(body)
    assert spans is not None
    if edit == "space":  # whitespace anywhere but inside an id
        places = [p for p in range(len(body) + 1) if not any(s < p < e for s, e in spans)]
        at = places[where % len(places)]
        changed = body[:at] + bytes([b" \t\n\r"[byte % 4]]) + body[at:]
    elif edit == "insert":  # any byte anywhere but inside an id or at either end of one
        places = [p for p in range(len(body) + 1) if not any(s <= p <= e for s, e in spans)]
        at = places[where % len(places)]
        changed = body[:at] + bytes([byte]) + body[at:]
    else:  # a byte not of an id replaced or removed
        places = [p for p in range(len(body)) if not any(s <= p < e for s, e in spans)]
        at = places[where % len(places)]
        if edit == "replace":
            new = byte if byte != body[at] else (byte + 1) % 256
            changed = body[:at] + bytes([new]) + body[at + 1 :]
        else:
            changed = body[:at] + body[at + 1 :]

    assert memo.replay(Asked(), changed) is None
    assert memo.replay(Asked(), body) is not None


# --- 4. What is not JSON is not scanned -----------------------------------------------------------


def refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def is_json(body: bytes) -> bool:
    """JSON's grammar (RFC 8259), read by the standard library: it, unlike orjson, reads lone
    surrogate escapes and numbers past a double's range, which the grammar allows."""
    try:
        json.loads(body.decode("utf-8"), parse_constant=refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return True


TOKENS = st.sampled_from(
    [b"{", b"}", b"[", b"]", b":", b",", b'"id"', b'"id":', b'"method"', b'"a"', b"1", b"0", b"-",
     b".", b"e", b"null", b"true", b" ", b"\n", b'"', b"\\", b"\x00", b"\xff", b"\xc3\xa9", b"\x7f"]
)  # fmt: skip
CALLS = st.sampled_from(
    [b'{"id":1}', b'{"id":"a","m":[1,{"id":2}]}', b'{"x":{},"id":null}', b'{"id":-7,"p":"\\u00e9"}',
     b'{"p":[1.5e3,true],"id":"q"}', b'{"id":12345678901234567}']
)  # fmt: skip
TOKEN_SOUPS = st.lists(st.one_of(CALLS, CALLS, TOKENS), max_size=12).map(b"".join)


@RULES
@given(body=st.one_of(st.binary(max_size=64), TOKEN_SOUPS))
def test_bytes_that_are_not_json_are_not_scanned(body: bytes) -> None:
    spans = scan(body)
    if spans is None:
        return
    assert is_json(body)
    document = json.loads(body.decode())
    for (start, end), call in zip(spans, calls_of(document), strict=True):
        assert same_id(json.loads(body[start:end]), call["id"])


@RULES
@given(request=requests(ANY_IDS), layout=layouts())
def test_a_body_cut_short_is_neither_json_nor_scanned(request: Any, layout: Layout) -> None:
    body = layout.encode(request)
    whole = len(body.rstrip(WHITESPACE.encode()))
    for cut in range(whole):
        prefix = body[:cut]
        assert scan(prefix) is None, prefix
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(prefix)


@RULES
@given(
    request=requests(ANY_IDS),
    layout=layouts(),
    where=st.integers(0, 2**32),
    byte=st.integers(0, 255),
)
def test_a_body_with_a_byte_changed_is_scanned_only_if_still_json(
    request: Any, layout: Layout, where: int, byte: int
) -> None:
    body = layout.encode(request)
    at = where % len(body)
    changed = body[:at] + bytes([byte]) + body[at + 1 :]
    if scan(changed) is not None:
        assert is_json(changed), changed


# --- 5. Counting, clearing, evicting --------------------------------------------------------------


def lone_call(name: str, id_: Any = 1, padding: int = 0) -> bytes:
    call = {"jsonrpc": "2.0", "id": id_, "method": name, "params": ["x" * padding]}
    return orjson.dumps(call)


def lone_answer(id_: Any = 1) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": "0x1"})


@RULES
@given(replays=st.lists(st.integers(0, 4), min_size=1, max_size=5), data=st.data())
def test_each_replay_is_counted_once_under_its_entrys_token_and_clearing_gives_every_token_back(
    replays: list[int], data: st.DataObject
) -> None:
    memo = Memo()
    tokens = [100 + index for index in range(len(replays))]
    for token in tokens:
        assert memo.install(token, Asked(), lone_call(f"m{token}"), lone_answer())
    asked = [token for token, times in zip(tokens, replays, strict=True) for _ in range(times)]
    for token in data.draw(st.permutations(asked)):
        new_id = data.draw(PLAIN_IDS)
        replayed = memo.replay(Asked(), lone_call(f"m{token}", new_id))
        assert replayed is not None
        assert orjson.loads(replayed[2])["id"] == new_id

    counts, gone = memo.drain()
    assert sorted(counts) == [(t, n) for t, n in zip(tokens, replays, strict=True) if n]
    assert gone == []
    assert memo.drain() == ([], [])

    memo.clear()
    assert all(memo.replay(Asked(), lone_call(f"m{token}")) is None for token in tokens)
    counts, gone = memo.drain()
    assert counts == []
    assert sorted(gone) == tokens
    assert memo.stats() == (0, 0)


def test_replays_counted_before_a_clear_are_drained_after_it() -> None:
    memo = Memo()
    assert memo.install(4, Asked(), lone_call("m"), lone_answer())
    assert memo.replay(Asked(), lone_call("m", "q")) is not None
    memo.clear()
    assert memo.drain() == ([(4, 1)], [4])


@RULES
@given(
    paddings=st.lists(st.integers(0, 600), min_size=2, max_size=30),
    bound=st.integers(2_000, 10_000),
)
def test_past_the_byte_bound_the_oldest_entries_go_first_and_their_tokens_come_back(
    paddings: list[int], bound: int
) -> None:
    memo = Memo(max_bytes=bound)
    installed: list[int] = []
    refused: list[int] = []
    for token, padding in enumerate(paddings):
        before = memo.stats()
        if memo.install(token, Asked(), lone_call(f"m{token}", padding=padding), lone_answer()):
            installed.append(token)
        else:
            refused.append(token)
            assert memo.stats() == before
        assert memo.stats()[1] <= bound

    counts, gone = memo.drain()
    assert counts == []
    assert gone == installed[: len(gone)]  # the oldest first
    kept = installed[len(gone) :]
    assert memo.stats()[0] == len(kept)
    for token, padding in enumerate(paddings):
        replayed = memo.replay(Asked(), lone_call(f"m{token}", "again", padding=padding))
        assert (replayed is not None) == (token in kept)


@RULES
@given(first=PLAIN_IDS, second=PLAIN_IDS, third=PLAIN_IDS)
def test_the_same_request_installed_again_replaces_the_entry_and_gives_its_token_back(
    first: Any, second: Any, third: Any
) -> None:
    memo = Memo()
    assert memo.install(1, Asked(), lone_call("m", first), lone_answer(first))
    assert memo.replay(Asked(), lone_call("m", third)) is not None
    assert memo.install(2, Asked(), lone_call("m", second), lone_answer(second))
    assert memo.replay(Asked(), lone_call("m", third)) is not None
    assert memo.stats()[0] == 1
    counts, gone = memo.drain()
    assert sorted(counts) == [(1, 1), (2, 1)]
    assert gone == [1]


def test_a_body_past_the_bound_is_neither_kept_nor_replayed() -> None:
    body = lone_call("m")
    memo = Memo(max_body_bytes=len(body) - 1)
    assert not memo.install(1, Asked(), body, lone_answer())
    assert memo.replay(Asked(), body) is None
    roomy = Memo(max_body_bytes=len(body))
    assert roomy.install(1, Asked(), body, lone_answer())


# --- An id member whose name is written with escapes ---------------------------------------------

ESCAPED_ID_NAMES = ["\\u0069d", "i\\u0064", "\\u0069\\u0064"]


@RULES
@given(
    first=PLAIN_IDS,
    other=PLAIN_IDS,
    second=PLAIN_IDS,
    name=st.sampled_from(ESCAPED_ID_NAMES),
    escaped_last=st.booleans(),
)
@example(first=1, other=2, second=1, name="\\u0069d", escaped_last=True)
def test_a_replay_echoes_the_id_the_pipeline_reads_even_with_an_escaped_id_member(
    first: Any, other: Any, second: Any, name: str, escaped_last: bool
) -> None:
    def body(raw_id: Any) -> bytes:
        raw = '"id":' + orjson.dumps(raw_id).decode()
        escaped = f'"{name}":' + orjson.dumps(second).decode()
        pair = [raw, escaped] if escaped_last else [escaped, raw]
        return ('{"jsonrpc":"2.0","method":"eth_chainId",' + ",".join(pair) + "}").encode()

    memo = Memo()
    [echoed] = echoed_ids(body(first))  # what the pipeline answers under
    answer = b'{"jsonrpc":"2.0","id":' + echoed + b',"result":"0x1"}'
    memo.install(1, Asked(), body(first), answer)

    replayed = memo.replay(Asked(), body(other))

    if replayed is not None:
        [expected] = echoed_ids(body(other))
        assert orjson.dumps(orjson.loads(replayed[2])["id"]) == expected
