"""Structured logs (issue 33, item 4): JSON lines for collectors, text for a terminal. The
router's line per request: tests/router/test_request_log.py."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from chainrouter.logs import FIELDS, JsonLines, TextLines, configure_logging
from chainrouter.settings import LogFormat, LogLevel


def _record(message: str, **fields: object) -> logging.LogRecord:
    record = logging.LogRecord("chainrouter.x", logging.INFO, __file__, 1, message, (), None)
    setattr(record, FIELDS, fields)
    return record


def test_a_json_line_holds_time_level_logger_message_and_fields() -> None:
    line = json.loads(JsonLines().format(_record("served %s", key_id=7, nodes=[1, 2])))
    assert line["level"] == "info"
    assert line["logger"] == "chainrouter.x"
    assert line["message"] == "served %s"
    assert (line["key_id"], line["nodes"]) == (7, [1, 2])
    assert line["time"].endswith("+00:00")


def test_an_error_keeps_its_traceback_in_one_json_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    text = JsonLines().format(record)
    assert "\n" not in text
    assert "ValueError: boom" in json.loads(text)["error"]


def test_a_text_line_is_for_people() -> None:
    text = TextLines().format(_record("rpc request", status=200, nodes=[3], key_id=None))
    assert text.endswith("rpc request status=200 nodes=3 key_id=-")


def test_auto_writes_json_unless_standard_error_is_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    try:
        configure_logging(LogLevel.INFO, LogFormat.AUTO)
        logging.getLogger("chainrouter.test").info("hello")
        assert json.loads(stream.getvalue())["message"] == "hello"
        configure_logging(LogLevel.INFO, LogFormat.TEXT)
        logging.getLogger("chainrouter.test").info("again")
        assert "INFO chainrouter.test: again" in stream.getvalue()
    finally:
        logging.basicConfig(force=True)  # pytest's capture takes over again
