"""Log set-up shared by the command line and the server workers it starts: JSON lines for log
collectors, or text for a terminal (`CHAINROUTER_LOG_FORMAT`; docs/operations.md, "Logs").

A record may carry structured fields in `extra={"fields": {...}}`: JSON lines hold them as
they are, text lines append them as `name=value`. Nothing here adds what a caller sent; the
code that logs chooses its fields, and never a secret (a test reads the logs of a full run).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from chainrouter.settings import LogFormat, LogLevel

FIELDS = "fields"


class JsonLines(logging.Formatter):
    """One JSON object a line: time (UTC, RFC 3339), level, logger, message, fields, error."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextLines(logging.Formatter):
    """For people: time, level, logger, message, then the fields as `name=value`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict) and fields:
            text += " " + " ".join(f"{name}={_plain(value)}" for name, value in fields.items())
        return text


def _plain(value: object) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value) or "-"
    return "-" if value is None else str(value)


def configure_logging(level: LogLevel, log_format: LogFormat = LogFormat.AUTO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    as_json = log_format is LogFormat.JSON or (
        log_format is LogFormat.AUTO and not sys.stderr.isatty()
    )
    handler.setFormatter(JsonLines() if as_json else TextLines())
    logging.basicConfig(level=level.value.upper(), handlers=[handler], force=True)
    if level is not LogLevel.DEBUG:
        logging.getLogger("alembic").setLevel(logging.WARNING)
