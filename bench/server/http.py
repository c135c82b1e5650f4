"""Talking to a starting or started server over HTTP: readiness (`/health`) and what it runs."""

import http.client
import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from bench.host.processes import describe_exit, log_tail_of, terminate_group


class LaunchError(RuntimeError):
    """The server could not start or be reached (message: exit code, log tail); `known_bug`: its known bug."""

    def __init__(
        self,
        message: str,
        *,
        exit_code: int | None = None,
        log_tail: str = "",
        pid: int | None = None,
        log_path: Path | None = None,
        known_bug: str | None = None,
    ):
        self.message = message
        self.exit_code = exit_code
        self.log_tail = log_tail
        self.pid = pid
        self.log_path = log_path
        self.known_bug = known_bug
        full = message if not log_tail else f"{message}\n--- last lines of the server log ---\n{log_tail}"
        super().__init__(full)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not an address to follow (issue 35 §4)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises HTTPError with the 3xx status, which http_get returns


def http_get(url: str, timeout_s: float) -> tuple[int, bytes]:
    """GET without proxies or redirects; every HTTP status is returned."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())
    try:
        with opener.open(url, timeout=timeout_s) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as e:
        body = e.read()
        e.close()
        return int(e.code), body


def wait_healthy(proc: subprocess.Popen[bytes], base_url: str, log_path: Path, timeout_s: float) -> None:
    """Poll `/health` until 200 (start-up only: contract §6.9); raise with the log tail on exit or timeout."""
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        if (rc := proc.poll()) is not None:
            raise LaunchError(
                f"server exited with code {rc} before it was ready ({describe_exit(rc)})",
                exit_code=rc,
                log_tail=log_tail_of(log_path),
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            terminate_group(proc, 5.0)  # first, so the tail holds what the server printed while dying
            raise LaunchError(
                f"server not healthy within {timeout_s:g} s at {base_url}/health (killed)",
                log_tail=log_tail_of(log_path),
            )
        try:
            status, _ = http_get(f"{base_url}/health", timeout_s=max(0.5, min(remaining, 30.0)))
        except (OSError, http.client.HTTPException):  # not listening yet, or not speaking HTTP yet
            status = None
        if status == 200:
            return
        time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
        delay = min(delay * 1.5, 1.0)


# What SGLang's /server_info always holds (contract §2.1); without it, the reply is another service's.
_SGLANG_INFO_KEYS = ("model_path",)


def fetch_server_info(base_url: str, timeout_s: float = 30.0) -> dict[str, Any]:
    """`/server_info`, or the deprecated `/get_server_info`. A non-SGLang reply raises with its status and a
    fixed message, its body never kept: errors reach the database, logs and dashboard (issue 30 §2)."""
    last = ""
    for path in ("/server_info", "/get_server_info"):
        url = f"{base_url}{path}"
        try:
            status, body = http_get(url, timeout_s)
        except OSError as e:
            raise LaunchError(f"cannot reach the server at {base_url}: {e}") from None
        if status == 404:
            last = f"{url}: 404"
            continue
        if status != 200:
            raise LaunchError(
                f"{url} answered HTTP {status}: not SGLang's /server_info (the reply is not kept)"
            )
        try:
            info = json.loads(body)
        except ValueError:
            raise LaunchError(
                f"{url} answered with something other than JSON: not SGLang's /server_info"
            ) from None
        if not isinstance(info, dict) or not all(k in info for k in _SGLANG_INFO_KEYS):
            raise LaunchError(
                f"{url} answered JSON without SGLang's server arguments: not SGLang's /server_info "
                "(the reply is not kept)"
            )
        return info
    raise LaunchError(f"{base_url} has neither /server_info nor /get_server_info ({last})")
