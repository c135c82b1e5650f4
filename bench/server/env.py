"""The environment a launched server gets: built from nothing, never inherited whole (the worker holds the
database URL). It is a small host base (PATH, HOME, locale, temp dir, CUDA/NCCL/Python/model caches), the
sweep's `server.env` limited to names that tune SGLang (env_names.py), and what specbench sets itself. Never
DATABASE_URL, a SPECBENCH_* setting, or a variable that makes a program load another (LD_PRELOAD, PYTHONPATH,
BROWSER, ...: issue 10); never the `--db env:NAME` variable (`withhold`) or a host variable that looks secret
by name or value (issue 35 §5). Hub access is the host's decision, never a job's (issue 35 §1)."""

import difflib
import math
import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlsplit

from bench.server.env_names import SET_BY_SPECBENCH, SWEEP_NAMES

# Names that load code or change compilation, for a refusal saying why (all off env_names.py are refused).
_LOADS_CODE = frozenset(
    {
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONWARNINGS",
        "BROWSER",
        "SGLANG_EXTERNAL_MODEL_PACKAGE",
        "SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE",
        "SGLANG_PLUGINS",
        "SGLANG_PLATFORM",
        "TRITON_CACHE_MANAGER",
        "TRITON_REMOTE_CACHE_BACKEND",
        "FLASHINFER_EXTRA_CFLAGS",
        "FLASHINFER_EXTRA_LDFLAGS",
        "TORCH_CUDA_ARCH_LIST",
    }
)
_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
MAX_VALUE_LEN = 4096
MAX_NAME_LEN = 128

# Host variables every launched server gets (when the host defines them).
HOST_BASE_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TERM",
        # Where the host keeps its libraries, interpreter tree and caches; a sweep cannot set them.
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "XDG_CACHE_HOME",
        "HF_HOME",
        "HF_HUB_CACHE",
        "HF_ENDPOINT",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "TORCHINDUCTOR_CACHE_DIR",
        # The toolchain for kernels SGLang compiles: FlashInfer bakes CXX into build.ninja (a switch: ~3 min).
        "CC",
        "CXX",
        "CUDAHOSTCXX",
        "LIBRARY_PATH",
        "CPATH",
        "C_INCLUDE_PATH",
        "CPLUS_INCLUDE_PATH",
        "MAX_JOBS",  # parallel compile jobs of those builds
        "PYTORCH_CUDA_ALLOC_CONF",
        "OMP_NUM_THREADS",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
    }
)
HOST_BASE_PREFIXES = ("LC_", "CUDA_", "NCCL_", "TORCH_", "TRITON_", "FLASHINFER_", "SGLANG_", "SGL_")
# More host variables the operator passes (comma-separated, e.g. a proxy): out of a job's reach.
PASS_SETTING = "SPECBENCH_SERVER_ENV_PASS"
# Never passed, whatever the host or the operator says.
_NEVER = re.compile(r"^(SPECBENCH_|DATABASE_URL$|PG[A-Z]*$|POSTGRES)")
# Host variables secret by a word of their name: passed only when named in SPECBENCH_SERVER_ENV_PASS.
_SECRET_NAME = re.compile(
    r"(^|_)(PASSWORD|PASSWD|SECRET|TOKEN|CREDENTIALS?|API_?KEY|ACCESS_KEY|PRIVATE_KEY)(_|$)"
)
# URL parameters that carry a secret (libpq's, as db.engine.SECRET_PARAMS, and the common `token`/`key`).
_SECRET_PARAMS = frozenset(
    {"password", "sslpassword", "passfile", "sslkey", "oauth_client_secret", "token", "key"}
)
# Hub access is the host's (--allow-hub-downloads), set over its values; HF_TOKEN only when allowed.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
HUB_TOKEN = "HF_TOKEN"
_HOST_DECIDES = frozenset({*OFFLINE_ENV, HUB_TOKEN, "HF_DATASETS_OFFLINE"})
# The variables `--db env:NAME` named in this process: a server never gets them (runners.common.db_url).
_WITHHELD: set[str] = set()


def withhold(name: str) -> None:
    """Never pass `name` to a server or the version probe: it holds this process's database URL."""
    _WITHHELD.add(name)


def looks_secret(name: str, value: str) -> bool:
    """A host variable holding a secret: by a word of its name, or a URL value with a password or secret."""
    if _SECRET_NAME.search(name):
        return True
    if "://" not in value:
        return False
    try:
        parts = urlsplit(value.strip())
        return bool(parts.password) or any(k.lower() in _SECRET_PARAMS for k, _ in parse_qsl(parts.query))
    except ValueError:  # not a URL we can read: cannot be shown to be clean
        return True


class ServerEnvError(ValueError):
    """A variable a sweep may not set, or a value that cannot go into an environment."""


def sweep_name_problem(name: str) -> str | None:
    """Why a sweep may not set `name`, or None when it may: only names on the list (env_names.py) pass."""
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > MAX_NAME_LEN:
        return f"{name!r} is not an environment variable name (A-Z, 0-9, _; at most {MAX_NAME_LEN})"
    if name.startswith("SPECBENCH_"):
        return f"{name}: specbench settings are the worker's, not the job's (server.sim sets the stand-in)"
    if name in SET_BY_SPECBENCH:
        return f"{name}: set by specbench itself ({SET_BY_SPECBENCH[name][1]})"
    if name in _HOST_DECIDES:
        return (
            f"{name}: whether servers reach the Hugging Face hub is the host's decision (specbench worker or run "
            "--allow-hub-downloads), never a sweep's"
        )
    if name in SWEEP_NAMES:
        return None
    why = (
        " (it makes the server load or run code the job chose, or changes what is compiled)"
        if name in _LOADS_CODE
        else ""
    )
    if close := difflib.get_close_matches(name, sorted(SWEEP_NAMES), n=1, cutoff=0.8):
        return f"{name}: not a server variable a sweep may set{why}; did you mean {close[0]}?"
    return (
        f"{name}: not a server variable a sweep may set{why}; a sweep may set only names that tune SGLang "
        f"and can make the server run no code the job chose: {', '.join(sorted(SWEEP_NAMES))} "
        "(docs/reference/sglang-contract.md, server variables)"
    )


def value_problem(value: object) -> str | None:
    """Why `value` cannot be an environment value (scalars only, printable, bounded), or None."""
    if value is None:
        return 'null is not a value (write an empty string "" if that is what you mean)'
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if len(str(abs(value))) <= 64 else "integer too long"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a finite number"
    if not isinstance(value, str):
        return f"must be a string, number or boolean, not {type(value).__name__}"
    if len(value) > MAX_VALUE_LEN:
        return f"longer than {MAX_VALUE_LEN} characters"
    if not value.isprintable():
        return "contains a newline, NUL or other control character"
    return None


def as_env_value(value: object) -> str:
    """A checked scalar as the environment holds it: booleans as 1/0 (what SGLang's env parsing reads)."""
    if problem := value_problem(value):
        raise ServerEnvError(problem)
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def check_sweep_env(env: Mapping[str, str]) -> list[str]:
    """Every problem with a sweep's `server.env`, each prefixed with where it is."""
    out = []
    for name, value in env.items():
        if problem := sweep_name_problem(name):
            out.append(f"server.env: {problem}")
        if problem := value_problem(value):
            out.append(f"server.env.{name}: {problem}")
    return out


def _never(name: str) -> bool:
    return bool(_NEVER.match(name)) or name in _WITHHELD


def host_base(host: Mapping[str, str], *, hub_downloads: bool = False) -> dict[str, str]:
    """The host variables every server gets (basics, GPU stack, operator's); HF_TOKEN with downloads."""
    extra = {n.strip() for n in host.get(PASS_SETTING, "").split(",") if n.strip()}
    if hub_downloads:
        extra.add(HUB_TOKEN)
    return {
        k: v
        for k, v in host.items()
        if not _never(k)
        and (
            k in extra
            or ((k in HOST_BASE_NAMES or k.startswith(HOST_BASE_PREFIXES)) and not looks_secret(k, v))
        )
    }


def build_server_env(
    host: Mapping[str, str],
    sweep_env: Mapping[str, str],
    specbench_env: Mapping[str, str],
    *,
    hub_downloads: bool = False,
) -> dict[str, str]:
    """The whole environment of a server (and of the version probe, without sweep env). `sweep_env` is checked
    again (a job stored by an older version); `specbench_env` is what the launcher sets."""
    if problems := check_sweep_env(sweep_env):
        raise ServerEnvError("; ".join(problems))
    env = {**host_base(host, hub_downloads=hub_downloads), **sweep_env, **specbench_env}
    leaked = sorted(
        k for k in env if _never(k) and not (k in specbench_env and k.startswith("SPECBENCH_SIM_"))
    )
    if leaked:  # only reachable through a bug in this module: fail closed
        raise ServerEnvError(f"refusing to pass {', '.join(leaked)} to a server")
    return env
