"""The modules compiled with mypyc, and the rule that a build runs only while it matches them.

Every call to the router passes through these modules; compiled, a worker serves about a fifth
more requests (docs/benchmarks.md). `make setup` builds them with
`scripts/compile_hot_path.py`: an extension module beside each source, one shared library at the
top of `src/`, and a manifest holding the digest of the sources the build came from.

Python prefers an extension module to a source file of the same name, so an edited source would
be shadowed by its old build. `guard()` runs when the package is first imported: unless the
manifest's digest matches the sources and the running interpreter, it sends every listed module
to its source file. It is all or none because compiled modules call each other directly, past
the module objects: a mix would run old code beside new. Setting `CHAINROUTER_INTERPRETED=1`
forces the sources too.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from types import ModuleType

MODULES: tuple[str, ...] = (
    "chainrouter.domain.access",
    "chainrouter.domain.domains",
    "chainrouter.domain.routing",
    "chainrouter.domain.snapshot",
    "chainrouter.jsonrpc.encode",
    "chainrouter.jsonrpc.envelope",
    "chainrouter.jsonrpc.errors",
    "chainrouter.jsonrpc.responses",
    "chainrouter.net.client_ip",
    "chainrouter.net.correlation",
    "chainrouter.ratelimit.gcra",
    "chainrouter.router.cooldown",
    "chainrouter.router.forward",
    "chainrouter.router.health",
    "chainrouter.router.http1",
    "chainrouter.router.http_face",
    "chainrouter.router.logs_range",
    "chainrouter.router.metering",
    "chainrouter.router.native_io",
    "chainrouter.router.service",
    "chainrouter.router.upstream",
    "chainrouter.router.web",
)
GROUP = "chainrouter_hot_path"  # the shared library: src/chainrouter_hot_path__mypyc.*.so
SOURCE_ROOT = Path(__file__).resolve().parent.parent
MANIFEST = SOURCE_ROOT / "chainrouter" / "hot_path_build.json"
INTERPRETED_ENV = "CHAINROUTER_INTERPRETED"


class BuildState(StrEnum):
    COMPILED = "compiled"  # the build matches the sources and is in use
    INTERPRETED = "interpreted"  # no build, or CHAINROUTER_INTERPRETED is set
    STALE = "stale"  # a build exists but the sources changed since: the sources run


def source_path(module: str, root: Path = SOURCE_ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def sources_digest(
    compiler_version: str, root: Path = SOURCE_ROOT, interpreter: str = sys.version
) -> str:
    """One digest over the listed modules' sources, their list, the compiler's version and the
    interpreter's (a build for another interpreter, another venv's say, does not count)."""
    digest = hashlib.sha256(compiler_version.encode() + b"\0" + interpreter.encode())
    for module in MODULES:
        digest.update(module.encode() + b"\0" + source_path(module, root).read_bytes() + b"\0")
    return digest.hexdigest()


def built_extensions() -> list[Path]:
    """The extension modules of a build present on disk, shared library included."""
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    found: list[Path] = []
    for module in MODULES:
        base = source_path(module).with_suffix("")
        found += [p for s in suffixes if (p := base.with_name(base.name + s)).exists()]
    found += [p for s in suffixes if (p := SOURCE_ROOT / f"{GROUP}__mypyc{s}").exists()]
    return found


def build_is_complete_and_current(compiler_version: str | None = None) -> bool:
    """Whether every extension of the build is on disk and its manifest matches the sources,
    compiled by `compiler_version` (by default, the version the manifest names)."""
    if len(built_extensions()) != len(MODULES) + 1:  # one per module and the shared library
        return False
    try:
        manifest = json.loads(MANIFEST.read_text())
        compiler = compiler_version or manifest["compiler"]
        return bool(manifest["digest"] == sources_digest(compiler))
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _read_state() -> BuildState:
    if os.environ.get(INTERPRETED_ENV, "") not in ("", "0"):
        return BuildState.INTERPRETED
    if not built_extensions():
        return BuildState.INTERPRETED
    return BuildState.COMPILED if build_is_complete_and_current() else BuildState.STALE


class _SourcesFirst(importlib.abc.MetaPathFinder):
    """Finds the listed modules' source files ahead of any extension module beside them."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname))


state = BuildState.INTERPRETED


def guard() -> BuildState:
    """Decide once per process whether the build or the sources run; returns the decision."""
    global state
    state = _read_state()
    if state is not BuildState.COMPILED and not any(
        isinstance(f, _SourcesFirst) for f in sys.meta_path
    ):
        sys.meta_path.insert(0, _SourcesFirst())
    if state is BuildState.STALE:
        warnings.warn(
            "the compiled hot path does not match its sources; running the sources "
            "(slower). Rebuild with `make setup`.",
            RuntimeWarning,
            stacklevel=2,
        )
    return state
