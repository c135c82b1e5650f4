"""scripts/jit_cache.sh: JIT caches survive a save on one host and a restore on a bare one, and a cache
archive cannot write outside the cache directories."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "jit_cache.sh"


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)


def test_save_then_restore_on_a_bare_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    kernel = home / ".cache" / "flashinfer" / "90a" / "cached_ops" / "norm" / "build.ninja"
    kernel.parent.mkdir(parents=True)
    kernel.write_text("cxx = /opt/gcc/bin/g++\n")
    (home / ".triton" / "cache").mkdir(parents=True)
    (home / ".triton" / "cache" / "k.cubin").write_bytes(b"\x7fELF")
    archive = tmp_path / "jit.tar.xz"

    saved = _run(home, "save", str(archive))
    assert saved.returncode == 0, saved.stderr
    assert archive.stat().st_size > 0 and not Path(f"{archive}.partial").exists()

    kernel.unlink()
    (home / ".triton" / "cache" / "k.cubin").unlink()
    restored = _run(home, "restore", str(archive))
    assert restored.returncode == 0, restored.stderr
    assert kernel.read_text() == "cxx = /opt/gcc/bin/g++\n"
    assert (home / ".triton" / "cache" / "k.cubin").read_bytes() == b"\x7fELF"


def test_save_without_caches_says_so(tmp_path: Path) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    # torch-inductor's cache is per user under /tmp and may exist on this machine; only check the message
    # when nothing at all is there.
    if any(Path("/tmp").glob("torchinductor_*")):
        pytest.skip("this machine has a torch-inductor cache in /tmp")
    done = _run(home, "save", str(tmp_path / "x.tar.xz"))
    assert done.returncode == 1 and "no JIT caches" in done.stderr


@pytest.mark.parametrize("escape", ["plain", "dotdot", "symlink"])
def test_restore_refuses_paths_outside_the_caches(tmp_path: Path, escape: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    target = tmp_path / "planted.txt"
    cache = f"{str(home)[1:]}/.cache/flashinfer"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        ok = tarfile.TarInfo(f"{cache}/ok.txt")
        ok.size = 2
        tf.addfile(ok, io.BytesIO(b"hi"))
        if escape == "symlink":  # a link inside the cache that points out of it
            link = tarfile.TarInfo(f"{cache}/out")
            link.type, link.linkname = tarfile.SYMTYPE, str(tmp_path)
            tf.addfile(link)
        else:
            name = str(target)[1:] if escape == "plain" else f"{cache}/../../../planted.txt"
            bad = tarfile.TarInfo(name)
            bad.size = 2
            tf.addfile(bad, io.BytesIO(b"hi"))
    archive = tmp_path / "evil.tar.xz"
    archive.write_bytes(
        subprocess.run(["xz", "-c"], input=raw.getvalue(), capture_output=True, check=True).stdout
    )

    done = _run(home, "restore", str(archive))
    assert done.returncode == 1 and "outside the JIT caches" in done.stderr
    assert not target.exists() and not (home / ".cache" / "flashinfer").exists()


def test_restore_of_a_missing_file_fails_clearly(tmp_path: Path) -> None:
    done = _run(tmp_path, "restore", str(tmp_path / "nope.tar.xz"))
    assert done.returncode == 1 and "does not exist" in done.stderr
