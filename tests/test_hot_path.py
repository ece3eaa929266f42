"""The compiled hot path runs only while its build matches the sources (chainrouter/hot_path.py).

The rules are checked on a copy of the package with stand-in extension modules: files Python
would try to load, and fail to, if the build were taken. So the tests need no C build of their
own, and a taken stand-in shows up as an import error.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chainrouter import hot_path

# `make test` builds the hot path first and sets this, so the suite checks what ships.
EXPECT_COMPILED = os.environ.get("CHAINROUTER_TEST_EXPECT_COMPILED", "") == "1"
COMPILER = "1.0-test"


def _package_copy(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    shutil.copytree(
        hot_path.SOURCE_ROOT / "chainrouter",
        root / "chainrouter",
        ignore=shutil.ignore_patterns("__pycache__", "*.so", "hot_path_build.json"),
    )
    return root


def _stand_in_build(root: Path, digest: str) -> None:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for module in hot_path.MODULES:
        source = hot_path.source_path(module, root)
        source.with_name(source.stem + suffix).write_bytes(b"not a shared library")
    (root / f"{hot_path.GROUP}__mypyc{suffix}").write_bytes(b"not a shared library")
    manifest = {"digest": digest, "compiler": COMPILER, "modules": list(hot_path.MODULES)}
    (root / "chainrouter" / "hot_path_build.json").write_text(json.dumps(manifest))


def _import_in_fresh_process(
    root: Path, module: str, **env: str
) -> subprocess.CompletedProcess[str]:
    script = (
        f"import {module} as m, chainrouter.hot_path as h; "
        "print(h.state.value); print(getattr(m, 'EDITED', False)); print(m.__file__)"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CHAINROUTER_")}
    return subprocess.run(
        [sys.executable, "-c", script],
        env={**environ, "PYTHONPATH": str(root), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_build_that_matches_its_sources_is_the_one_imported(tmp_path: Path) -> None:
    root = _package_copy(tmp_path)
    _stand_in_build(root, hot_path.sources_digest(COMPILER, root))

    ran = _import_in_fresh_process(root, "chainrouter.router.service")

    # The stand-in was taken: Python tried to load it as a shared library.
    assert ran.returncode != 0
    assert "ImportError" in ran.stderr


def _build_then_edit_forward(tmp_path: Path) -> tuple[Path, Path]:
    """A package copy with a matching build, then `router/forward.py` edited (EDITED = True)."""
    root = _package_copy(tmp_path)
    _stand_in_build(root, hot_path.sources_digest(COMPILER, root))
    edited = hot_path.source_path("chainrouter.router.forward", root)
    edited.write_text(edited.read_text() + "\nEDITED = True\n")
    return root, edited


def test_an_edited_source_runs_instead_of_its_stale_build_with_a_warning(tmp_path: Path) -> None:
    root, edited = _build_then_edit_forward(tmp_path)

    ran = _import_in_fresh_process(root, "chainrouter.router.forward")

    assert ran.returncode == 0, ran.stderr
    state, was_edited, file = ran.stdout.split()
    assert (state, was_edited, file) == ("stale", "True", str(edited))
    assert "does not match its sources" in ran.stderr


def test_an_unedited_module_of_a_stale_build_runs_from_its_source_too(tmp_path: Path) -> None:
    # Compiled modules call each other directly, so a stale build is set aside as a whole.
    root, _ = _build_then_edit_forward(tmp_path)

    ran = _import_in_fresh_process(root, "chainrouter.router.web")

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[2] == str(hot_path.source_path("chainrouter.router.web", root))


def test_a_build_from_another_compiler_version_is_stale(tmp_path: Path) -> None:
    root = _package_copy(tmp_path)
    _stand_in_build(root, hot_path.sources_digest("0.9-older", root))

    ran = _import_in_fresh_process(root, "chainrouter.router.service")

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[0] == "stale"


def test_a_build_for_another_interpreter_is_stale(tmp_path: Path) -> None:
    root = _package_copy(tmp_path)
    other = "3.11.0 (main, Jan 1 2023, 00:00:00) [another build]"
    _stand_in_build(root, hot_path.sources_digest(COMPILER, root, interpreter=other))

    ran = _import_in_fresh_process(root, "chainrouter.router.service")

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[0] == "stale"


def test_the_interpreted_switch_runs_the_sources_beside_a_matching_build(tmp_path: Path) -> None:
    root = _package_copy(tmp_path)
    _stand_in_build(root, hot_path.sources_digest(COMPILER, root))

    ran = _import_in_fresh_process(
        root, "chainrouter.router.service", **{hot_path.INTERPRETED_ENV: "1"}
    )

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[0] == "interpreted"
    assert ran.stderr == ""


def test_without_a_build_the_sources_run_without_a_warning(tmp_path: Path) -> None:
    root = _package_copy(tmp_path)

    ran = _import_in_fresh_process(root, "chainrouter.router.service")

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[0] == "interpreted"
    assert ran.stderr == ""


def test_every_hot_module_comes_from_the_build_in_force() -> None:
    if EXPECT_COMPILED:
        assert hot_path.state is hot_path.BuildState.COMPILED, "run `make setup` to build"
    compiled = hot_path.state is hot_path.BuildState.COMPILED
    for module in hot_path.MODULES:
        file = importlib.import_module(module).__file__
        assert file is not None
        assert file.endswith(".py") is not compiled, module


@pytest.mark.parametrize("module", hot_path.MODULES)
def test_each_listed_module_has_a_source(module: str) -> None:
    assert hot_path.source_path(module).is_file()


# What every forwarded call builds. Under mypyc a dataclass's generated __init__ stays Python
# bytecode, run by the interpreter at each construction: these define their own, compiled.
PER_CALL_CLASSES = (
    "chainrouter.jsonrpc.envelope:RpcCall",
    "chainrouter.jsonrpc.envelope:Payload",
    "chainrouter.router.forward:Served",
    "chainrouter.router.service:Reply",
    "chainrouter.router.service:_Caller",
    "chainrouter.router.upstream:UpstreamReply",
)


@pytest.mark.parametrize("name", PER_CALL_CLASSES)
def test_objects_built_per_call_are_built_by_compiled_code(name: str) -> None:
    module, _, attribute = name.partition(":")
    cls = getattr(importlib.import_module(module), attribute)
    init = cls.__dict__["__init__"]
    compiled = hot_path.state is hot_path.BuildState.COMPILED
    assert hasattr(init, "__code__") is not compiled, f"{name}: __init__ is not compiled"
