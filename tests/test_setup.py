"""The setup a fresh clone gets: `make setup` installs exactly what requirements.lock pins (with uv, itself
pinned), the lock pins every dependency pyproject.toml names within its range, and setuptools reads
pyproject.toml without a warning."""

from __future__ import annotations

import re
import subprocess
import tomllib
import warnings

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.paths import REPO_ROOT

LOCK = REPO_ROOT / "requirements.lock"
_PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s\\;]+)", re.M)


def _pins() -> dict[str, Version]:
    return {canonicalize_name(n): Version(v) for n, v in _PIN.findall(LOCK.read_text())}


def test_the_lock_pins_every_dependency_within_its_range() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    wanted = [Requirement(r) for r in (*project["dependencies"], *project["optional-dependencies"]["dev"])]
    for req in wanted:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is not in requirements.lock: run `make lock`"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req}: the lock pins {pins[name]}"
    # Every pin carries hashes: what a fresh clone installs cannot drift with the registry.
    blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", LOCK.read_text().strip())
    assert all("--hash=sha256:" in b for b in blocks if _PIN.match(b)), "a pin without a hash"


def test_make_setup_installs_the_lock_with_pinned_uv() -> None:
    plan = subprocess.run(
        ["make", "-n", "-B", "setup", "VENV=/nonexistent/venv"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"pip install -qq .*uv==\d+\.\d+\.\d+", plan), plan
    assert re.search(r"uv pip sync .*requirements\.lock", plan), plan  # exactly the lock, nothing else
    assert "pip install -q -e" not in plan and "[dev]" not in plan, plan  # no resolution at install time


def test_setuptools_reads_pyproject_without_a_warning() -> None:
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the license table's deprecation was four warnings per install
        # Not setuptools': a connection another test left to the garbage collector may be closed meanwhile.
        warnings.simplefilter("ignore", ResourceWarning)
        dist = apply_configuration(Distribution(), REPO_ROOT / "pyproject.toml")
    assert getattr(dist.metadata, "license_expression", None) == "Apache-2.0"
