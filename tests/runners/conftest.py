"""Fixtures the runners' tests share."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.job_is_data_support import SECRET_BODY, Counting


@pytest.fixture
def marker_script(tmp_path: Path) -> tuple[Path, Path]:
    """An executable named python3 in a "checkpoint" folder: it writes its arguments and environment to a
    marker file (read them back with `runs_of`) and says it is SGLang 0.5.13.post1."""
    marker = tmp_path / "ran.env"
    script = tmp_path / "checkpoints" / "v3" / "python3"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!/bin/sh\n{{ echo \"ARGV: $*\"; env; }} >> '{marker}'\necho 0.5.13.post1\nexit 0\n")
    script.chmod(0o755)
    return script, marker


@pytest.fixture
def hostile() -> Iterator[tuple[str, type[Counting]]]:
    """A loopback service that is not SGLang: every GET gets a 403 with a secret in its body."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(403)
            self.send_header("Content-Length", str(len(SECRET_BODY)))
            self.end_headers()
            self.wfile.write(SECRET_BODY)

        def log_message(self, *args: Any) -> None:
            pass

    server_cls = type("Counting", (Counting,), {"connections": 0})
    server = server_cls(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", server_cls
    server.shutdown()
    server.server_close()
