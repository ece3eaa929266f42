"""`make setup` step: compile the router's hot path with mypyc (src/chainrouter/hot_path.py).

Does nothing when the build on disk matches the sources and the compiler. Otherwise it removes
the old build first, so a failed build leaves the sources running, then compiles every listed
module into one group, places the extension modules beside their sources, writes the manifest
and checks in a fresh interpreter that the package takes the build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import mypy.version
from mypyc.build import mypycify
from setuptools import setup

with warnings.catch_warnings():
    # The package warns on import that the build is stale: this script is what rebuilds it.
    warnings.simplefilter("ignore", RuntimeWarning)
    from chainrouter import hot_path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "mypyc"


def _compile() -> None:
    sources = [
        str(hot_path.source_path(m).relative_to(hot_path.SOURCE_ROOT)) for m in hot_path.MODULES
    ]
    # Module names follow the paths from the working directory, and build_ext --inplace places
    # each extension by its dotted name under it.
    os.chdir(hot_path.SOURCE_ROOT)
    extensions = mypycify(sources, opt_level="3", target_dir=str(BUILD), group_name=hot_path.GROUP)
    setup(
        name="chainrouter-hot-path",
        # mypyc's return type also admits distutils' Extension; it builds setuptools' ones.
        ext_modules=extensions,  # type: ignore[arg-type]
        script_args=[
            "--quiet",
            "build_ext",
            "--inplace",
            "--parallel",
            str(os.cpu_count() or 1),
            "--build-temp",
            str(BUILD / "temp"),
            "--build-lib",
            str(BUILD / "lib"),
        ],
    )


def main() -> None:
    if os.environ.get(hot_path.INTERPRETED_ENV, "") not in ("", "0"):
        print(f"{hot_path.INTERPRETED_ENV} is set: hot path not compiled")
        return
    compiler = mypy.version.__version__
    if hot_path.build_is_complete_and_current(compiler):
        print("hot path: compiled build is up to date")
        return
    for old in hot_path.built_extensions():
        old.unlink()
    hot_path.MANIFEST.unlink(missing_ok=True)
    count = len(hot_path.MODULES)
    print(f"hot path: compiling {count} modules with mypyc {compiler} (a minute or two)")
    digest = hot_path.sources_digest(compiler)
    _compile()
    hot_path.MANIFEST.write_text(
        json.dumps(
            {"digest": digest, "compiler": compiler, "modules": list(hot_path.MODULES)}, indent=2
        )
        + "\n"
    )
    check = "import chainrouter.hot_path as h, chainrouter.router.web; print(h.state)"
    taken = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True
    )
    if taken.stdout.strip() != hot_path.BuildState.COMPILED:
        sys.exit(f"hot path: the build is not taken ({taken.stdout.strip()}): {taken.stderr}")
    print("hot path: compiled")


if __name__ == "__main__":
    main()
