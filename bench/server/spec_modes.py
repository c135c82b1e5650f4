"""Spec v1/v2 per SGLang release: what to pass at launch and how to tell what ran (pure; contract §1.4-1.5).
v1 = non-overlap, v2 = overlap-scheduled; `--disable-overlap-schedule` selects v1 everywhere, and
`SGLANG_ENABLE_SPEC_V2` exists up to 0.5.13. 0.5.12 runs the v1 worker classes when overlap ends up disabled
(forced silently for topk > 1); from 0.5.13 the V2 worker always runs, driven synchronously for "v1". The mode
comes from `/server_info`, cross-checked with the launch log; bench/server/requested.py lists the rest."""

import re
from dataclasses import dataclass, field
from typing import Any, Literal

SpecMode = Literal["v1", "v2"]

ENV_SPEC_V2 = "SGLANG_ENABLE_SPEC_V2"
FLAG_NON_OVERLAP = "--disable-overlap-schedule"

# Algorithms that 0.5.12 switches between the v1 and v2 worker classes (NEXTN is aliased to EAGLE).
EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"})

# The releases whose source the contract was read from: the one list; the stand-in emulates exactly these.
RELEASES: tuple[str, ...] = ("0.5.12", "0.5.13", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.23")
DEFAULT_RELEASE = "0.5.13.post1"  # what specbench is tested against (pyproject's `[gpu]` extra pins it)

_FIRST_ALWAYS_V2 = (0, 5, 13)  # v1 worker files deleted; non-overlap = synchronous V2 worker
_ENV_REMOVED = (0, 5, 14)  # SGLANG_ENABLE_SPEC_V2 gone; the flag is the only switch

# Launch-log lines of §1.5, newest wording first (0.5.13's v2 line contains 0.5.12's as a substring).
_LOG_PATTERNS: tuple[tuple[re.Pattern[str], SpecMode], ...] = (
    (re.compile(r"Non-overlap \(synchronous\) spec v2 is used for [\w/]+ speculative decoding"), "v1"),
    (re.compile(r"Overlap spec v2 is enabled by default for [\w/]+ speculative decoding"), "v2"),
    (
        re.compile(r"Spec v1 is used for [\w/]+ speculative decoding(?: because (?P<reason>[^\n]*?))?\.?$"),
        "v1",
    ),
    (re.compile(r"(?<!Overlap )Spec v2 is enabled by default for [\w/]+ speculative decoding"), "v2"),
)
# The ServerArgs dump that every release logs at startup; a second source when /server_info lacks the key.
_DUMP_DISABLE_OVERLAP = re.compile(r"server_args=ServerArgs\(.*?\bdisable_overlap_schedule=(True|False)\b")

_RELEASE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


class VersionError(ValueError):
    """A version string no rule can be applied to."""


def parse_version(version: str) -> tuple[int, ...]:
    """Release tuple: '0.5.13.post1' -> (0, 5, 13); pre/post/dev parts drop (0.5.14rc follows 0.5.14)."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # packaging is usually present but is not a declared dependency
        pass
    else:
        try:
            return tuple(Version(version).release)
        except InvalidVersion:
            pass
    m = _RELEASE.match(version or "")
    if not m:
        raise VersionError(f"cannot read an SGLang version from {version!r}")
    return tuple(int(x) for x in m.group(1).split("."))


def release3(version: str) -> tuple[int, int, int]:
    """The first three release numbers, where SGLang's rules change: '0.5.13.post1' -> (0, 5, 13)."""
    r = (*parse_version(version), 0, 0, 0)
    return (r[0], r[1], r[2])


KNOWN_RELEASES: tuple[tuple[int, int, int], ...] = tuple(sorted({release3(v) for v in RELEASES}))
OLDEST_RELEASE = min(RELEASES, key=release3)
NEWEST_RELEASE = max(RELEASES, key=release3)


def rule_note(version: str) -> str | None:
    """Why a version's rules are assumed rather than read from its source; None for the known releases."""
    r = release3(version)
    if r in KNOWN_RELEASES:
        return None
    if r < KNOWN_RELEASES[0]:
        return f"{version} predates {OLDEST_RELEASE}; {OLDEST_RELEASE}'s rules assumed"
    if r > KNOWN_RELEASES[-1]:
        return f"{version} is newer than {NEWEST_RELEASE}; {NEWEST_RELEASE}'s rules assumed"
    below = ".".join(map(str, max(k for k in KNOWN_RELEASES if k < r)))
    above = ".".join(map(str, min(k for k in KNOWN_RELEASES if k > r)))
    return f"{version} lies between {below} and {above}; the rules both share are assumed"


def env_var_status(version: str) -> Literal["honoured", "removed_warns", "ignored"]:
    """What the release does with SGLANG_ENABLE_SPEC_V2."""
    r = release3(version)
    if r < _ENV_REMOVED:
        return "honoured"
    # 0.5.14 and 0.5.15 print the removal warning; 0.5.23 no longer does. 0.5.16-0.5.22 were not read.
    return "removed_warns" if r <= (0, 5, 15) else "ignored"


# Balanced routing for dummy weights (contract §1.6): 0.5.13+, two exclusive switches; 0.5.13-0.5.15 also
# overwrite a fused shared expert's slot.
ENV_UNIFORM_EXPERTS = "SGLANG_SIMULATE_UNIFORM_EXPERTS"
ENV_ROUND_ROBIN_EXPERTS = "SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS"
_ROUTING_SWITCH_SINCE = (0, 5, 13)


def balanced_routing_switch(version: str) -> str | None:
    """The environment variable that balances expert routing on this release, or None (0.5.12 has none)."""
    return ENV_UNIFORM_EXPERTS if release3(version) >= _ROUTING_SWITCH_SINCE else None


def fused_shared_slot_drawn(version: str) -> bool:
    """Whether the release's uniform routing also overwrites a fused shared expert's slot (0.5.13-0.5.15)."""
    return _ROUTING_SWITCH_SINCE <= release3(version) < (0, 5, 23)


def launch_settings(version: str, mode: SpecMode | None) -> tuple[list[str], dict[str, str]]:
    """Flags and env selecting `mode`: the flag always, the env var up to 0.5.13 (later it only warns)."""
    if mode is None:  # no speculative decoding: nothing to choose
        return [], {}
    if mode not in ("v1", "v2"):
        raise ValueError(f"spec mode must be 'v1' or 'v2', not {mode!r}")
    honoured = env_var_status(version) == "honoured"
    if mode == "v1":
        return [FLAG_NON_OVERLAP], ({ENV_SPEC_V2: "False"} if honoured else {})
    return [], ({ENV_SPEC_V2: "True"} if honoured else {})


def known_fallback(
    version: str, mode: SpecMode | None, algorithm: str | None, topk: int | None
) -> str | None:
    """A silent fallback this release applies, or None; it explains a mismatch (`resolve_mode` decides)."""
    if mode != "v2" or algorithm is None or algorithm.upper() not in EAGLE_FAMILY:
        return None
    if release3(version) < _FIRST_ALWAYS_V2 and topk is not None and topk > 1:
        return (
            f"SGLang {version} forces spec v1 for an explicit --speculative-eagle-topk > 1 "
            "('spec v2 currently only supports topk = 1')"
        )
    return None


@dataclass(frozen=True)
class ResolvedMode:
    """What the server runs. `mode` is None when speculative decoding is off or cannot be told."""

    mode: SpecMode | None
    detail: str
    spec_enabled: bool
    version: str
    # server_info keys the verdict rests on, with their values.
    server_info_keys: dict[str, Any] = field(default_factory=dict)
    # The launch-log line that names the mode (None: no such line, or no log).
    log_line: str | None = None
    log_mode: SpecMode | None = None
    contradiction: str | None = None  # set when /server_info and the log disagree or nothing decides the mode

    @property
    def evidence(self) -> dict[str, Any]:
        return {
            "server_info": dict(self.server_info_keys),
            "log_line": self.log_line,
            "log_mode": self.log_mode,
            "contradiction": self.contradiction,
        }


def find_log_mode(log_text: str | None) -> tuple[SpecMode | None, str | None]:
    """The mode the launch log names and the line that names it (the last one, should a log hold several)."""
    if not log_text:
        return None, None
    found: tuple[SpecMode | None, str | None] = (None, None)
    for line in log_text.splitlines():
        for pattern, mode in _LOG_PATTERNS:
            if pattern.search(line.rstrip()):
                found = (mode, line.strip())
                break
    return found


def _log_disable_overlap(log_text: str | None) -> bool | None:
    if not log_text:
        return None
    hits = _DUMP_DISABLE_OVERLAP.findall(log_text)
    return hits[-1] == "True" if hits else None


def _worker(version: str, algorithm: str, mode: SpecMode, multi_layer: bool) -> str:
    if algorithm not in EAGLE_FAMILY:
        return f"{algorithm} worker"
    base = "Standalone" if algorithm == "STANDALONE" else "MultiLayerEagle" if multi_layer else "EAGLE"
    v2_class = release3(version) >= _FIRST_ALWAYS_V2 or mode == "v2"
    return f"{base}WorkerV2" if v2_class else f"{base}Worker"


def resolve_mode(version: str, server_info: dict[str, Any], log_text: str | None) -> ResolvedMode:
    """v1/v2 from `/server_info` (contract §1.5), checked against the launch log (None: external server)."""
    reported = str(server_info.get("version") or "")
    try:
        parse_version(reported)
        version = reported
    except VersionError:
        pass  # a missing or odd version string: the caller's detection is all there is
    keys: dict[str, Any] = {"version": server_info.get("version")}
    log_mode, log_line = find_log_mode(log_text)
    note = rule_note(version)
    suffix = f"{version}; {note}" if note else version

    algorithm_raw = server_info.get("speculative_algorithm")
    keys["speculative_algorithm"] = algorithm_raw
    algorithm = str(algorithm_raw).upper() if algorithm_raw else None
    if algorithm in (None, "NONE"):
        contradiction = None
        if log_mode is not None:
            contradiction = (
                f"/server_info shows no speculative algorithm but the log says {log_mode}: {log_line!r}"
            )
        detail = f"no speculative decoding ({suffix})"
        return ResolvedMode(None, detail, False, version, keys, log_line, log_mode, contradiction)
    assert algorithm is not None

    source = "server_info"
    disable_overlap = server_info.get("disable_overlap_schedule")
    keys["disable_overlap_schedule"] = disable_overlap
    if not isinstance(disable_overlap, bool):
        disable_overlap = _log_disable_overlap(log_text)
        source = "ServerArgs dump in the log"
    if "enable_multi_layer_eagle" in server_info:
        keys["enable_multi_layer_eagle"] = server_info["enable_multi_layer_eagle"]
    multi_layer = bool(server_info.get("enable_multi_layer_eagle"))

    if disable_overlap is None:
        # Neither /server_info nor the argument dump says; a version line alone is weaker, so flag it.
        if log_mode is None:
            detail = (
                f"unknown: /server_info has no disable_overlap_schedule and the log names no mode ({suffix})"
            )
            return ResolvedMode(
                None, detail, True, version, keys, contradiction="no evidence of the spec mode"
            )
        mode: SpecMode = log_mode
        source = "log line only"
    else:
        # 0.5.12: v1 iff EAGLE family and no overlap (others forced non-overlap); >= 0.5.13: the flag.
        mode = "v1" if disable_overlap else "v2"

    worker = _worker(version, algorithm, mode, multi_layer)
    if mode == "v1":
        kind = "non-overlap" if release3(version) < _FIRST_ALWAYS_V2 else "synchronous"
    else:
        kind = "overlap"
    detail = f"{mode}: {kind} {worker} ({suffix})"
    if source != "server_info":
        detail += f" [from {source}]"
    if log_line and log_mode == "v1" and (m := re.search(r"because (.+?)\.?$", log_line)):
        detail += f"; log reason: {m.group(1)}"

    contradiction = None
    if log_mode is not None and log_mode != mode:
        contradiction = f"{source} says {mode} but the launch log says {log_mode}: {log_line!r}"
    return ResolvedMode(mode, detail, True, version, keys, log_line, log_mode, contradiction)
