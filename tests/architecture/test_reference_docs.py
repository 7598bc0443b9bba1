"""The reference pages name what the code has, and nothing that is gone: every setting of the
worker's Settings struct is a row of docs/reference/settings.md (with its flag and default), the
page's tables are what `chunkstream settings` prints from the settings' declarations, every
dead-letter kind (a worker.errors.DocumentError subclass) is a row of docs/reference/events.md
and named in the README, and every `chunkstream` subcommand has its section in
docs/reference/cli.md. (The metrics page has
its own test, tests/observability/test_metrics_doc.py.)"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from worker.cli import build_parser
from worker.config import Settings, env_name, flag_name, settings_table
from worker.errors import DocumentError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference"
SETTINGS_HEADER = ["variable", "flag", "type", "default", "meaning"]


def documented_settings() -> dict[str, tuple[str, str]]:
    """``{variable: (flag, default)}`` of every row of the settings tables, the tables headed
    | variable | flag | type | default | meaning | (a ``\\|`` inside a cell is not a column
    break; the page's other tables, of variables that are not settings, are not read)."""
    rows: dict[str, tuple[str, str]] = {}
    header: list[str] = []
    for line in (DOCS / "settings.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        if not cells:
            header = []
        elif not header:
            header = cells
        elif header == SETTINGS_HEADER:
            variable = re.fullmatch(r"`(CHUNKSTREAM_[A-Z0-9_]+)`", cells[0])
            if variable:
                assert len(cells) == 5, f"{variable[1]}: expected 5 cells, got {cells}"
                assert variable[1] not in rows, f"{variable[1]} is documented twice"
                rows[variable[1]] = (cells[1].strip("`"), cells[3])
    return rows


def shown_default(value: object) -> str:
    if value in (None, "", [], {}):
        return ""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def test_every_setting_is_documented_and_none_that_is_gone() -> None:
    rows = documented_settings()
    fields = {env_name(field): field for field in Settings.__struct_fields__}
    assert len(fields) > 40  # the struct was read
    assert sorted(set(fields) - set(rows)) == [], "settings missing from reference/settings.md"
    assert sorted(set(rows) - set(fields)) == [], "reference/settings.md names settings gone"
    defaults = Settings()
    for variable, (flag, default) in rows.items():
        field = fields[variable]
        assert flag == flag_name(field), variable
        assert default == shown_default(getattr(defaults, field)), f"{variable}'s default"


def test_the_settings_page_holds_what_chunkstream_settings_prints() -> None:
    page = (DOCS / "settings.md").read_text(encoding="utf-8")
    assert settings_table() in page, "settings.md is stale: paste `chunkstream settings`"


def error_kinds() -> set[str]:
    """The ``error_kind`` of every DocumentError subclass, however deep."""
    kinds: set[str] = set()
    pending = list(DocumentError.__subclasses__())
    while pending:
        cls = pending.pop()
        kinds.add(cls.kind)
        pending += cls.__subclasses__()
    return kinds


def test_every_dead_letter_kind_is_documented_and_none_that_is_gone() -> None:
    events = (DOCS / "events.md").read_text(encoding="utf-8")
    table = events[events.index("### Dead letters") :].split("\n## ")[0]
    body = table[table.index("|---|") :]  # the rows under the header
    rows = set(re.findall(r"^\| `([a-z_0-9]+)` \|", body, flags=re.MULTILINE))
    kinds = error_kinds()
    assert {"undecodable", "too_many_chunks", "unkeyed_tombstone"} <= kinds  # the walk found them
    assert sorted(kinds - rows) == [], "dead-letter kinds missing from reference/events.md"
    assert sorted(rows - kinds) == [], "reference/events.md names dead-letter kinds that are gone"
    readme = (DOCS.parents[1] / "README.md").read_text(encoding="utf-8")
    after = readme[readme.index("stable `error_kind`") :]
    listed = re.split(r"\)\s+and\s+the\s+original", after)[0]
    assert set(re.findall(r"`([a-z_0-9]+)`", listed)) - {"error_kind"} == kinds


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    """Every leaf command of the parser: `run`, `chunk`, …, `model build`."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                inner = subcommands(child, f"{prefix}{name} ")
                found |= inner or {f"{prefix}{name}"}
    return found


def test_every_subcommand_has_its_section_and_none_that_is_gone() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## `chunkstream ([a-z -]+)`$", text, flags=re.MULTILINE))
    commands = subcommands(build_parser())
    assert {"run", "chunk", "model build"} <= commands  # the walk found the parser's commands
    assert sorted(commands - sections) == [], "subcommands missing from reference/cli.md"
    assert sorted(sections - commands) == [], "reference/cli.md names subcommands that are gone"
