"""The package as pip and PyPI see it: a wheel and an sdist build from `clients/python` without leaving anything in
the checkout, the wheel holds every module and `py.typed`, and the sdist holds what a rebuild needs. Built with the
`build` front end and the backend `pyproject.toml` pins, both from the test extra (no isolated environment, so the
test needs no network)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]


def names_in(path: Path) -> set:
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            return set(wheel.namelist())
    with tarfile.open(path) as sdist:
        return {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out), str(PROJECT)],
        check=True, capture_output=True, text=True,
    )
    return out


def test_a_wheel_and_an_sdist_build_and_leave_the_checkout_as_it_was(built: Path) -> None:
    [wheel] = built.glob("*.whl")
    [sdist] = built.glob("*.tar.gz")
    assert wheel.name.startswith("cairn_client-") and wheel.name.endswith("-py3-none-any.whl")
    leftovers = [p.name for p in PROJECT.iterdir() if p.name in ("build", "dist") or p.name.endswith(".egg-info")]
    leftovers += [p.name for p in (PROJECT / "src").iterdir() if p.name.endswith(".egg-info")]
    assert leftovers == []


def test_the_wheel_holds_every_module_and_py_typed(built: Path) -> None:
    [wheel] = built.glob("*.whl")
    names = names_in(wheel)
    modules = {f"cairn/{p.name}" for p in (PROJECT / "src" / "cairn").iterdir() if p.suffix == ".py"}
    assert modules | {"cairn/py.typed"} <= names
    assert not any(name.startswith("tests/") for name in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(wheel) as opened:
        text = opened.read(metadata).decode()
    assert "Requires-Dist: httpx" in text and "Requires-Python: >=3.9" in text


def test_the_sdist_holds_the_source_the_readme_and_the_tests(built: Path) -> None:
    [sdist] = built.glob("*.tar.gz")
    names = names_in(sdist)
    assert {"pyproject.toml", "README.md", "src/cairn/__init__.py", "src/cairn/py.typed", "tests/conftest.py"} <= names


def test_the_build_backend_pinned_is_the_one_the_tests_use() -> None:
    text = (PROJECT / "pyproject.toml").read_text()
    [required] = [line for line in text.splitlines() if line.startswith("requires = ")]
    pin = required.split('"')[1]
    assert f'"{pin}"' in text.split("[project.optional-dependencies]", 1)[1], "the test extra pins the same hatchling"
