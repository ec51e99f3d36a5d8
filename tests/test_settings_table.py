"""The settings table of docs/kernel-api.md is the one ``markdown_table()`` renders, so the docs
never drift from the settings the code accepts."""

from __future__ import annotations

from pathlib import Path

from shmcomm.config import markdown_table

DOC = Path(__file__).resolve().parents[1] / "docs" / "kernel-api.md"


def docs_settings_table() -> str:
    """The first table under the ``## Settings`` heading of docs/kernel-api.md."""
    text = DOC.read_text()
    assert "\n## Settings\n" in text, "docs/kernel-api.md has no '## Settings' heading"
    section = text.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    assert start is not None, "the Settings section of docs/kernel-api.md has no table"
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[start:end])


def test_docs_settings_table_is_markdown_table():
    # regenerate with: python -c "from shmcomm.config import markdown_table; print(markdown_table())"
    assert docs_settings_table() == markdown_table()


def test_docs_settings_table_lists_every_setting():
    from shmcomm.config import SETTINGS

    rows = docs_settings_table().splitlines()[2:]
    assert [row.split("|")[1].strip().strip("`") for row in rows] == [s.name for s in SETTINGS]
