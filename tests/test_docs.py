"""The key reference in docs/ is generated from the key definitions; keep them in step."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support import ROOT


def test_key_reference_matches_the_code() -> None:
    keys = subprocess.run([sys.executable, "-m", "tabletopic.cli", "keys"], capture_output=True, text=True,
                          check=True).stdout
    reference = (ROOT / "docs" / "configuration.md").read_text()
    assert keys.strip() in reference, "regenerate the reference: tabletopic keys"


def test_readme_links_point_at_files() -> None:
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(((?:docs|deploy|bench)/[^)#]+)\)", readme):
        assert (ROOT / target).exists(), target


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if line.endswith("-m pytest"))
    assert command in (ROOT / ".ci" / "run").read_text()
