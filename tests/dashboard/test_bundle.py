"""The dashboard's script and style are built from their sources and the npm lock file's
packages (uPlot, esbuild) on this machine, with nothing fetched, and the committed bundles are
exactly what that build makes (decisions.md, "The dashboard")."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.anvil import REPO_ROOT

DASHBOARD = REPO_ROOT / "src" / "chainrouter" / "api" / "dashboard"


def test_the_committed_bundles_are_what_the_sources_and_the_lock_file_build(
    tmp_path: Path,
) -> None:
    subprocess.run([str(REPO_ROOT / "scripts" / "dashboard.sh"), str(tmp_path)], check=True)
    for name in ("app.js", "app.css"):
        built = (tmp_path / name).read_bytes()
        assert built == (DASHBOARD / name).read_bytes(), (
            f"{name} is stale: run scripts/dashboard.sh (make setup) and commit it"
        )


def test_the_chart_library_is_inside_the_bundle_with_its_licence() -> None:
    script = (DASHBOARD / "app.js").read_text()
    assert "uPlot" in script
    assert "MIT" in script  # uPlot's licence comment, kept by the build
    assert not re.search(
        r"^\s*(import|export)\b", script, re.MULTILINE
    )  # one file, nothing to fetch
