"""scripts/offline-bundle: the per-release pin tables, build_bundle.sh's argument handling (no network), the pin
check against bundled packages' Requires-Dist, and bootstrap.sh on a small fake bundle of two releases."""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import subprocess
import tarfile
import tomllib
from pathlib import Path

import pytest

from bench.server.spec_modes import DEFAULT_RELEASE, RELEASES
from tests.paths import REPO_ROOT

HERE = REPO_ROOT / "scripts" / "offline-bundle"
BUILD = HERE / "build_bundle.sh"
PINS = HERE / "pins.py"
BIG = ("sglang", "sglang-kernel", "flashinfer-python")


def _build(*args: str, release: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "SGLANG_RELEASE"} | env
    if release is not None:
        full["SGLANG_RELEASE"] = release
    return subprocess.run(
        ["bash", str(BUILD), *args], env=full, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT
    )


def _releases() -> list[str]:
    out = subprocess.run(
        ["python3", str(PINS), "releases"], capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout.split()


def _pins(stdout: str) -> dict[str, str]:
    lines = [ln for ln in stdout.splitlines() if ln and not ln.startswith("#")]
    return dict(ln.split("==", 1) for ln in lines)


# ---- the tables ----


def test_list_releases_names_every_table_and_only_releases_specbench_knows() -> None:
    listed = _build("--list-releases")
    assert listed.returncode == 0, listed.stderr
    names = listed.stdout.split()
    assert set(names) == {p.stem for p in (HERE / "pins").glob("*.txt")}
    assert {"0.5.12", DEFAULT_RELEASE} <= set(names)
    assert set(names) <= set(RELEASES), "a bundle for a release the stand-in and launcher do not know"


@pytest.mark.parametrize("release", _releases())
def test_print_pins_of_each_release_is_a_valid_exact_table(release: str) -> None:
    done = _build("--print-pins", release=release)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"# sglang {release} ")
    pins = _pins(done.stdout)
    assert pins["sglang"] == release
    assert all(name in pins for name in BIG)
    assert all(v and " " not in v for v in pins.values())


def test_the_default_release_is_specbench_s_and_matches_pyproject_gpu_extra() -> None:
    done = _build("--print-pins")
    assert done.returncode == 0, done.stderr
    pins = _pins(done.stdout)
    assert pins["sglang"] == DEFAULT_RELEASE
    gpu = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    extra = dict(r.split("==", 1) for r in gpu)
    assert {n: pins[n] for n in BIG} == {n: extra[n] for n in BIG}


def test_releases_pin_their_own_kernels() -> None:
    """Each release's table differs where the releases' wheels differ: one shared table would pass the rest."""
    a, b = (_pins(_build("--print-pins", release=r).stdout) for r in ("0.5.12", "0.5.13.post1"))
    assert a["sglang-kernel"] != b["sglang-kernel"] and a["flashinfer-python"] != b["flashinfer-python"]


@pytest.mark.parametrize("release", ["0.4.0", "../0.5.12", "latest"])
def test_an_unknown_release_fails_with_one_line_naming_the_known_ones(release: str) -> None:
    done = _build("--print-pins", release=release)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    if release == "0.4.0":
        assert "0.5.12" in done.stderr and DEFAULT_RELEASE in done.stderr


def test_an_unknown_option_fails_before_any_work() -> None:
    done = _build("--no-such-option")
    assert done.returncode == 2 and "unknown option --no-such-option" in done.stderr


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("sglang==0.5.12\nsglang-kernel>=0.4\nflashinfer-python==0.6.11\n", "not an exact pin"),
        (
            "sglang==0.5.12\nsglang-kernel==0.4.2\nsglang_kernel==0.4.3\nflashinfer-python==0.6.11\n",
            "pinned twice",
        ),
        ("sglang==0.5.12\nsglang-kernel==0.4.2\n", "missing flashinfer-python"),
        ("sglang==0.5.13\nsglang-kernel==0.4.2\nflashinfer-python==0.6.11\n", "the table is for 0.5.12"),
        ("sglang==0.5.12\nsglang-kernel==0.4.2\nflashinfer-python==zero\n", "not a valid version"),
    ],
)
def test_a_broken_table_is_refused_with_where_and_why(tmp_path: Path, body: str, message: str) -> None:
    (tmp_path / "0.5.12.txt").write_text("# a table\n" + body)
    done = _build("--print-pins", release="0.5.12", BUNDLE_PINS_DIR=str(tmp_path))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    # and the real build refuses it too, before touching the network or the cache
    built = _build(
        "x", release="0.5.12", BUNDLE_PINS_DIR=str(tmp_path), SPECBENCH_GPU_CACHE=str(tmp_path / "c")
    )
    assert built.returncode == 2 and not (tmp_path / "c").exists()


# ---- the check of an installed site tree against the bundled packages' Requires-Dist ----


def _dist(site: Path, name: str, version: str, *requires: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


def _check(site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["python3", str(PINS), "check", str(site)], capture_output=True, text=True, timeout=60
    )


def test_site_check_passes_a_consistent_tree_and_reports_the_torch_the_host_needs(tmp_path: Path) -> None:
    _dist(tmp_path, "sglang", "0.5.12", "torch==2.11.0", "transformers==5.6.0", "xgrammar==0.2.0", "datasets")
    _dist(tmp_path, "transformers", "5.6.0", "tokenizers<=0.23.0,>=0.22.0", "huggingface-hub<2.0,>=1.5.0")
    _dist(tmp_path, "tokenizers", "0.22.2")
    done = _check(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torch==2.11.0"


def test_site_check_refuses_a_pin_a_bundled_package_rules_out(tmp_path: Path) -> None:
    _dist(tmp_path, "sglang", "0.5.12", "torch==2.11.0", "transformers==5.6.0")
    _dist(tmp_path, "transformers", "5.8.1", "tokenizers<=0.23.0,>=0.22.0")
    _dist(tmp_path, "tokenizers", "0.23.2")
    _dist(
        tmp_path, "decord2", "1.0", 'numpy; platform_machine == "aarch64"'
    )  # a marker that is off on x86_64
    done = _check(tmp_path)
    assert done.returncode == 1
    assert "sglang 0.5.12 requires transformers==5.6.0, the bundle has 5.8.1" in done.stderr
    assert "transformers 5.8.1 requires tokenizers<=0.23.0,>=0.22.0, the bundle has 0.23.2" in done.stderr


# ---- bootstrap.sh on a fake bundle ----


def _fake_bundle(whl: Path, release: str, host_modules: str = "json", pieces: int = 2) -> Path:
    """What build_bundle.sh writes into .whl/<release>/, around a one-module site tree."""
    out = whl / release
    out.mkdir(parents=True)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        body = f"RELEASE = {release!r}\n".encode()
        info = tarfile.TarInfo("./fakesgl/__init__.py")
        info.size = len(body)
        tf.addfile(info, io.BytesIO(body))
    blob = lzma.compress(raw.getvalue())
    step = len(blob) // pieces + 1
    sums = [f"{hashlib.sha256(blob).hexdigest()}  sgl-site.tar.xz"]
    for i in range(pieces):
        part = out / f"sgl-site.tar.xz.part-{i:02d}"
        part.write_bytes(blob[i * step : (i + 1) * step])
        sums.append(f"{hashlib.sha256(part.read_bytes()).hexdigest()}  {part.name}")
    (out / "sgl-site.tar.xz.sha256").write_text("\n".join(sums) + "\n")
    (out / "BUNDLE").write_text(f"release={release}\ntorch=\nhost_modules={host_modules}\n")
    (out / "bootstrap.sh").write_bytes((HERE / "bootstrap.sh").read_bytes())
    (whl / "bootstrap.sh").write_bytes((HERE / "bootstrap.sh").read_bytes())
    return out


def _source(project: Path, script: str, after: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("SGLANG_RELEASE", "SGL_SITE", "SGL_SITE_ROOT")}
    full |= {"HOME": str(project.parent / "home"), "PYTHONPATH": "", **env}
    cmd = f"source {script}; rc=$?; echo rc=$rc; echo PYTHONPATH=$PYTHONPATH; {after}"
    return subprocess.run(
        ["bash", "-c", cmd], cwd=project, env=full, capture_output=True, text=True, timeout=120
    )


def _out(done: subprocess.CompletedProcess[str], key: str) -> str:
    return next(ln.split("=", 1)[1] for ln in done.stdout.splitlines() if ln.startswith(key + "="))


def test_bootstrap_unpacks_each_release_once_and_switches_between_them(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    home = tmp_path / "home"
    _fake_bundle(project / ".whl", "0.5.12")
    _fake_bundle(project / ".whl", "0.5.13.post1")
    show = "python3 -c \"import fakesgl; print('loaded=' + fakesgl.RELEASE)\""

    first = _source(project, ".whl/0.5.12/bootstrap.sh", show)
    assert _out(first, "rc") == "0", first.stderr
    assert "unpacked sglang 0.5.12 bundle" in first.stdout
    assert _out(first, "loaded") == "0.5.12"
    assert _out(first, "PYTHONPATH").split(":") == [str(home / "sgl-site-0.5.12"), str(project)]

    # both releases in one shell: the second takes the first one's site tree off the path
    both = _source(project, ".whl/0.5.12/bootstrap.sh; source .whl/0.5.13.post1/bootstrap.sh", show)
    assert _out(both, "rc") == "0", both.stderr
    assert "unpacked sglang 0.5.12" not in both.stdout, "an unpacked release was unpacked again"
    assert "unpacked sglang 0.5.13.post1" in both.stdout
    assert _out(both, "loaded") == "0.5.13.post1"
    assert _out(both, "PYTHONPATH").split(":") == [str(home / "sgl-site-0.5.13.post1"), str(project)]

    # .whl/bootstrap.sh with two bundles needs a choice; SGLANG_RELEASE makes it
    several = _source(project, ".whl/bootstrap.sh")
    assert _out(several, "rc") == "1" and "several bundles" in several.stderr
    chosen = _source(project, ".whl/bootstrap.sh", show, SGLANG_RELEASE="0.5.12")
    assert _out(chosen, "rc") == "0" and _out(chosen, "loaded") == "0.5.12"
    absent = _source(project, ".whl/bootstrap.sh", SGLANG_RELEASE="0.5.14")
    assert _out(absent, "rc") == "1" and "no bundle for sglang 0.5.14" in absent.stderr


def test_bootstrap_with_one_bundle_needs_no_choice(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    _fake_bundle(project / ".whl", "0.5.12")
    done = _source(project, ".whl/bootstrap.sh", SGL_SITE_ROOT=str(tmp_path / "sites"))
    assert _out(done, "rc") == "0", done.stderr
    assert _out(done, "PYTHONPATH").startswith(str(tmp_path / "sites" / "sgl-site-0.5.12") + ":")


def test_bootstrap_waits_for_missing_pieces_and_refuses_a_corrupt_one(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    out = _fake_bundle(project / ".whl", "0.5.12")
    piece = out / "sgl-site.tar.xz.part-01"
    data = piece.read_bytes()
    piece.unlink()
    waiting = _source(project, ".whl/0.5.12/bootstrap.sh")
    assert _out(waiting, "rc") == "2" and "still missing: sgl-site.tar.xz.part-01" in waiting.stderr

    piece.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])
    corrupt = _source(project, ".whl/0.5.12/bootstrap.sh")
    assert _out(corrupt, "rc") == "3" and "checksum FAILED" in corrupt.stderr
    assert not (tmp_path / "home" / "sgl-site-0.5.12").exists()


def test_bootstrap_refuses_a_host_without_a_module_the_server_imports(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    _fake_bundle(project / ".whl", "0.5.12", host_modules="json no_such_module_xyz")
    done = _source(project, ".whl/0.5.12/bootstrap.sh")
    assert _out(done, "rc") == "5"
    assert "the host lacks no_such_module_xyz" in done.stderr and "json" not in done.stderr.split("lacks")[1]


def _patch_for(path: str, before: str, after: str, name: str = "fix") -> str:
    """A specbench patch (scripts/offline-bundle/patches) changing a one-line file `before` -> `after`."""
    sha = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in (("b", before), ("a", after))}
    return (
        f"specbench patch: {name}\nrelease: 0.5.13.post1\nfile: {path}\nbefore-sha256: {sha['b']}\n"
        f"after-sha256: {sha['a']}\n\nwhy, in prose\n\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n"
        f"-{before}+{after}"
    )


def _bundle_with_sglang(project: Path) -> None:
    out = project / ".whl" / "0.5.13.post1"
    out.mkdir(parents=True)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        for name, body in (
            ("./sglang/__init__.py", b""),
            ("./sglang/attn.py", b"READS = 'prefix'\n"),
            ("./kernels/__init__.py", b""),  # what the patched copy must share, not copy
        ):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tf.addfile(info, io.BytesIO(body))
    blob = lzma.compress(raw.getvalue())
    (out / "sgl-site.tar.xz.part-00").write_bytes(blob)
    digest = hashlib.sha256(blob).hexdigest()
    (out / "sgl-site.tar.xz.sha256").write_text(
        f"{digest}  sgl-site.tar.xz\n{digest}  sgl-site.tar.xz.part-00\n"
    )
    (out / "BUNDLE").write_text("release=0.5.13.post1\ntorch=\nhost_modules=json\n")
    for target in (out / "bootstrap.sh", project / ".whl" / "bootstrap.sh"):
        target.write_bytes((HERE / "bootstrap.sh").read_bytes())
    tools = project / "scripts" / "offline-bundle"
    tools.mkdir(parents=True)
    (tools / "sglang_patch.py").write_bytes((HERE / "sglang_patch.py").read_bytes())


def test_bootstrap_with_a_patch_keeps_a_patched_copy_beside_the_unpatched_one(tmp_path: Path) -> None:
    """The patched copy holds the sglang package only, in front of the one site tree: its kernels keep one path,
    which FlashInfer's JIT cache keys its builds on (two full copies rebuilt kernels on every server start)."""
    project, home = tmp_path / "proj", tmp_path / "home"
    _bundle_with_sglang(project)
    good = project / "fix.patch"
    good.write_text(_patch_for("sglang/attn.py", "READS = 'prefix'\n", "READS = 'prefix + drafts'\n"))
    show = (
        "python3 -c \"import sglang.attn, kernels; print('reads=' + sglang.attn.READS); "
        "print('kernels=' + kernels.__file__)\""
    )

    patched = _source(project, ".whl/bootstrap.sh", show, SGL_PATCH="fix.patch")
    assert _out(patched, "rc") == "0", patched.stderr
    assert _out(patched, "reads") == "prefix + drafts"
    assert "| patched: fix |" in patched.stdout
    site, overlay = home / "sgl-site-0.5.13.post1", home / "sgl-site-0.5.13.post1+fix"
    assert _out(patched, "PYTHONPATH").split(":") == [str(overlay), str(site), str(project)]
    assert _out(patched, "kernels") == str(site / "kernels" / "__init__.py")
    assert sorted(p.name for p in overlay.iterdir()) == [".bundle-sha256", "sglang"]
    assert '"patch": "fix"' in (overlay / "sglang" / "SPECBENCH_PATCH.json").read_text()
    assert (site / "sglang" / "attn.py").read_text() == "READS = 'prefix'\n"

    plain = _source(project, ".whl/bootstrap.sh", show)  # unpatched stays the default, in its own tree
    assert _out(plain, "rc") == "0", plain.stderr
    assert _out(plain, "reads") == "prefix" and "| unpatched |" in plain.stdout
    # switching back in the same shell takes the patched copy off the path
    back = _source(
        project, ".whl/bootstrap.sh; SGL_PATCH= source .whl/bootstrap.sh", show, SGL_PATCH="fix.patch"
    )
    assert _out(back, "reads") == "prefix" and str(overlay) not in _out(back, "PYTHONPATH")
    again = _source(project, ".whl/bootstrap.sh", show, SGL_PATCH="fix.patch")
    assert "unpacked" not in again.stdout and _out(again, "reads") == "prefix + drafts"

    # A patch made against another file installs nothing, and says so.
    (project / "other.patch").write_text(
        _patch_for("sglang/attn.py", "READS = 'x'\n", "READS = 'y'\n", "other")
    )
    refused = _source(project, ".whl/bootstrap.sh", SGL_PATCH="other.patch")
    assert _out(refused, "rc") == "6"
    assert "not the file this patch was made against" in refused.stderr
    assert not (home / "sgl-site-0.5.13.post1+other").exists()
    missing = _source(project, ".whl/bootstrap.sh", SGL_PATCH="nope.patch")
    assert _out(missing, "rc") == "1" and "SGL_PATCH=nope.patch does not exist" in missing.stderr
