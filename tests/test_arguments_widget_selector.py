"""widgets/common.js: the saved widget state's `_static_id` reaches a CSS selector only through
`cssEscape` (CSS.escape, or a fallback): a shared notebook can put any text there."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

COMMON_JS = Path(__file__).resolve().parents[1] / "mgpu_lab" / "widgets" / "common.js"


def _function(source: str, name: str) -> str:
    """The text of `function name(...) { ... }` (the helpers are top-level, closed by a '}' line)."""
    match = re.search(rf"^function {name}\(.*?^}}$", source, re.S | re.M)
    assert match, f"common.js has no function {name}"
    return match.group(0)


def test_every_selector_built_from_the_static_id_goes_through_the_escape():
    source = COMMON_JS.read_text(encoding="utf-8")
    selectors = re.findall(r"querySelector(?:All)?\((`[^`]*`)\)", source)
    assert selectors, "hideStaticTwin no longer builds a selector: update this test"
    for selector in selectors:
        for interpolated in re.findall(r"\$\{([^}]*)\}", selector):
            assert interpolated.startswith("cssEscape("), f"{selector}: ${{{interpolated}}} is not escaped"


def test_the_escape_prefers_css_escape_and_has_a_fallback():
    escape = _function(COMMON_JS.read_text(encoding="utf-8"), "cssEscape")
    assert "CSS.escape(" in escape and 'typeof CSS !== "undefined"' in escape
    assert ".replace(" in escape, "no fallback for browsers without CSS.escape"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_fallback_leaves_no_quote_or_bracket_unescaped():
    """Run the fallback (node has no CSS global) on a hostile id."""
    escape = _function(COMMON_JS.read_text(encoding="utf-8"), "cssEscape")
    hostile = 'x"],body,[a="\u00e9\U0001F600'
    script = f"{escape}\nprocess.stdout.write(cssEscape({json.dumps(hostile)}));"
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out == "x\\22 \\5d \\2c body\\2c \\5b a\\3d \\22 \\e9 \\1f600 ", out
