"""The settings table and what is generated from it: the typed fields (common/settings_fields.py),
the reference page (docs/configuration.md), the sections and the flags the table names."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from cli.main import main as strata
from common import settings_doc
from common.config import SECTIONS, SETTINGS, Config, default_config
from common.env_vars import ENV_VARS
from common.settings_fields import SettingsFields

ROOT = Path(__file__).resolve().parents[2]


def test_generated_files_are_what_the_tables_give():
    stale = settings_doc.stale(ROOT)
    assert not stale, (f"{', '.join(map(str, stale))} differ from the settings tables: run "
                       f"`{settings_doc.COMMAND}` and commit the result")


def test_the_typed_fields_are_the_settings():
    """What mypy sees (SettingsFields' annotations) is what Config holds (its slots)."""
    annotations = SettingsFields.__annotations__
    assert list(annotations) == [s.name for s in SETTINGS]
    assert all(annotations[s.name] == s.type.__name__ for s in SETTINGS)
    assert set(Config.__slots__) == {s.name for s in SETTINGS} | {"_values"}


def test_a_config_reads_from_slots_and_names_an_unknown_setting():
    config = default_config(broker_port=7000)
    assert config.broker_port == 7000
    assert not hasattr(config, "__dict__")            # slots only: no per-instance dict
    with pytest.raises(AttributeError, match="no setting named 'brokr_port'"):
        config.brokr_port  # noqa: B018
    assert config.replace(broker_port=7001).broker_port == 7001


def test_every_setting_is_in_a_section_and_every_section_has_settings():
    titles = [s.title for s in SECTIONS]
    assert len(set(titles)) == len(titles), "two sections with one title"
    assert all(s.section in titles for s in SETTINGS)
    assert all(any(s.section == title for s in SETTINGS) for title in titles), "an empty section"
    assert all(s.doc for s in SECTIONS)


def test_names_are_in_one_table():
    settings = {"STRATA_" + s.name.upper() for s in SETTINGS}
    assert not settings & {v.name for v in ENV_VARS}


def test_the_dead_setting_is_gone():
    assert "bookie_journal_file_bytes_max" not in {s.name for s in SETTINGS}


def _help(command: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        strata([*command, "--help"])
    assert exited.value.code == 0, command
    return out.getvalue()


@pytest.mark.parametrize("flag", sorted({f for s in SETTINGS for f in s.flags}))
def test_the_flags_the_table_names_exist(flag):
    words = flag.split()
    assert words[0] == "strata" and words[-1].startswith("--"), flag
    assert words[-1] in _help(words[1:-1]).split(), f"{flag}: not in `{' '.join(words[:-1])} --help`"


@pytest.mark.parametrize("text, markdown", [
    ("a|b *c* <d> e_f", "a\\|b \\*c\\* &lt;d&gt; e\\_f"),
    ("at most broker_port, `x_y|z`", "at most `broker_port`, `x_y|z`"),
    ("not_a_setting", "not\\_a\\_setting"),
])
def test_prose_escapes_markdown_outside_code(text, markdown):
    assert settings_doc.prose(text) == markdown


def test_units_come_from_the_name():
    by_name = {s.name: s for s in SETTINGS}
    assert settings_doc.unit(by_name["broker_stats_rate_window_ms"]) == "ms"
    assert settings_doc.unit(by_name["broker_bundle_split_msg_rate_max"]) == "msg/s"
    assert settings_doc.unit(by_name["retention_size_mb"]) == "MB"
    assert settings_doc.unit(by_name["broker_partitions_max"]) == ""


def test_the_page_is_one_titled_markdown_page_without_links():
    """docs/ is built by MkDocs in strict mode: one `#` title, no links that could break."""
    page = settings_doc.reference_page()
    titles = [line for line in page.splitlines() if line.startswith("# ")]
    assert titles == ["# Configuration reference"]
    assert "](" not in page and "<a " not in page
    for setting in SETTINGS:
        assert f"| `{setting.name}` |" in page
