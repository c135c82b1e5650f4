"""SGLang's log lines, all to stderr: `[YYYY-mm-dd HH:MM:SS] msg` from the launcher, `[... TP0] msg` from the
scheduler. Launch tools grep them, so the prefix matters more than levels.
"""

import logging
import sys

launch = logging.getLogger("synthetic.server.launch")
scheduler = logging.getLogger("synthetic.server.scheduler")


def setup(level: str = "info") -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    for logger, fmt in ((launch, "[%(asctime)s] %(message)s"), (scheduler, "[%(asctime)s TP0] %(message)s")):
        logger.handlers.clear()
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(fmt, "%Y-%m-%d %H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(numeric)
        logger.propagate = False


def plain(line: str) -> None:
    """Lines SGLang prints without its formatter (uvicorn's), e.g. `INFO:     Started server process`."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
