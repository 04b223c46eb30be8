"""Input rules before any round trip: names (R-N1), instants (R-N2), payloads (R-N4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from service.errors import (
    InvalidName,
    InvalidPayload,
    MalformedJSON,
    NaiveDatetime,
    PayloadTooLarge,
    PgwakeError,
    ReservedName,
)
from service.names import check_name
from service.payloads import encode_payload, parse_json, require_aware


@pytest.mark.parametrize("name", ["a", "emails", "a.b:c-d_e", "x" * 128, "Q1"])
def test_valid_names(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "x" * 129, "a b", "é", "a/b", "a\x00", None, 5, "a\n"])
def test_invalid_names(name: object) -> None:
    with pytest.raises(InvalidName) as info:
        check_name(name)
    assert info.value.code == "invalid_name" and info.value.status == 422


def test_reserved_names() -> None:
    with pytest.raises(ReservedName):
        check_name("__scheduler")
    assert check_name("__scheduler", allow_reserved=True) == "__scheduler"
    assert check_name("_single") == "_single"


def test_every_error_is_a_pgwake_error_with_a_code() -> None:
    for cls in (
        InvalidName,
        ReservedName,
        NaiveDatetime,
        InvalidPayload,
        PayloadTooLarge,
        MalformedJSON,
    ):
        assert issubclass(cls, PgwakeError) and cls.code and 400 <= cls.status < 500


def test_naive_datetimes_are_rejected() -> None:
    with pytest.raises(NaiveDatetime):
        require_aware(datetime(2030, 1, 1))
    aware = datetime(2030, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    assert require_aware(aware) is aware
    assert require_aware(datetime.now(UTC))


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"v": float("nan")}, InvalidPayload),
        ({"v": [1, float("-inf")]}, InvalidPayload),
        ({"v": "a\x00"}, InvalidPayload),
        ({"a\x00": 1}, InvalidPayload),
        ({"v": "\udc80"}, InvalidPayload),
        ({"v": object()}, InvalidPayload),
        ({1: "non-string key"}, InvalidPayload),
        ([], InvalidPayload),
        ("text", InvalidPayload),
        ({"v": "x" * 2048}, PayloadTooLarge),
    ],
)
def test_payload_rules(value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        encode_payload(value, max_bytes=1024)


def test_payload_round_trip_keeps_unicode() -> None:
    assert encode_payload({"k": "wörld ✓", "n": [1, 2.5, None, True]}) == (
        '{"k":"wörld ✓","n":[1,2.5,null,true]}'
    )


def test_payload_size_counts_utf8_bytes() -> None:
    with pytest.raises(PayloadTooLarge):
        encode_payload({"k": "✓" * 400}, max_bytes=1024)  # 1200 bytes, 400 characters


def test_deep_nesting_is_refused() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(100):
        node["n"] = {}
        node = node["n"]  # type: ignore[assignment]
    with pytest.raises(InvalidPayload):
        encode_payload(deep)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"{", MalformedJSON),
        (b"NaN", MalformedJSON),
        (b'{"a": Infinity}', MalformedJSON),
        (b"\xff\xfe", MalformedJSON),
        (b'{"a": "\\u0000"}', InvalidPayload),
        (b'{"a": "\\ud800"}', InvalidPayload),
        (b"[" * 100000 + b"]" * 100000, InvalidPayload),
        (b"{}" + b" " * 2000, PayloadTooLarge),
    ],
)
def test_parse_json_is_strict(raw: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_json(raw, max_bytes=1024 if len(raw) < 10000 else 10**6)
