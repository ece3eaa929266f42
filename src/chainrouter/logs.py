"""Log set-up shared by the command line and the server workers it starts."""

from __future__ import annotations

import logging
import sys

from chainrouter.settings import LogLevel


def configure_logging(level: LogLevel) -> None:
    logging.basicConfig(
        level=level.value.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )
    if level is not LogLevel.DEBUG:
        logging.getLogger("alembic").setLevel(logging.WARNING)
