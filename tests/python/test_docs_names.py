"""The docs name only what exists: every `feedline.X` written in docs/*.md
and README.md resolves (a module, or an attribute of one)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
NAME = re.compile(r"`(feedline(?:\.[A-Za-z_]\w*)+)")


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_feedline_name_in_the_docs_exists(doc):
    names = sorted(set(NAME.findall(doc.read_text(encoding="utf-8"))))
    missing = [n for n in names if not _resolves(n)]
    assert not missing, f"{doc.name} names what feedline does not have: {missing}"
