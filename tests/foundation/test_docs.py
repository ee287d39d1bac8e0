"""The docs in the repository stay true to the repository (text checks only, well under a second).

`make docs` builds docs/ with MkDocs in strict mode, which already fails on a broken link between
pages, a missing anchor or a page left out of the nav. What MkDocs cannot see is checked here:
- README stays a front page: at most 250 lines, the two commands, a link to every page of the site;
  and every relative link in it resolves;
- a file path written as inline code in README or docs/ (`common/config.py`) names a file that
  exists, so a moved module shows up here rather than as a stale page;
- every `docs/<page>.md` that code or docs cite exists, and every "docs/protocol.md §8.2" cited
  names a numbered section of that page (about forty docstrings cite it by number);
- nothing points outside the repository (to notes in a folder beside it, which a clone lacks);
- the command tables (README, docs/operations.md) name every `strata` command of `cli/main.py`.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_LINES_MAX = 250

# Folders that hold no source of ours: tools' state, build output, data of local runs.
SKIP_DIRS = {".git", ".venv", "site", "data", "cluster", "__pycache__", ".pytest_cache", ".hypothesis",
             "build", "node_modules", "analytics-out"}
TEXT_SUFFIXES = {".py", ".proto", ".md", ".toml", ".yml", ".yaml", ".sh", ".cfg", ".txt", ".json"}

# A path in inline code: a top-level folder of the repository, then more segments, ending in a
# file name with an extension. Globs, placeholders and URLs are not paths.
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FILE_PATH = re.compile(r"^[A-Za-z_][\w.-]*(/[\w.-]+)+\.[A-Za-z]{1,5}$")
PROTOCOL_CITATION = re.compile(r"docs/protocol\.md([\s§\d.,\-–]*)")
SECTION = re.compile(r"§(\d+(?:\.\d+)*)")
DOC_CITATION = re.compile(r"docs/([\w-]+\.md)")
OUTSIDE = re.compile(r"\.\./shared|(DESIGN|PROTOCOL)\.md")


def _repo_text_files() -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        found += [Path(folder) / name for name in files
                  if (Path(name).suffix in TEXT_SUFFIXES or name == "Makefile") and "_pb2" not in name]
    return found


def _pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def _nav_pages(nav: object) -> set[str]:
    """Every page file named in mkdocs.yml's nav, at any depth."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_nav_pages(item) for item in nav)) if nav else set()
    if isinstance(nav, dict):
        return set().union(*(_nav_pages(value) for value in nav.values())) if nav else set()
    return set()


def test_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= README_LINES_MAX, "README is a front page: move detail to docs/"
    assert "make standalone" in text and "make test" in text


def test_readme_links_resolve_and_map_every_page():
    text = README.read_text()
    links = {target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", text)
             if not re.match(r"[a-z]+:", target)}
    missing = sorted(link for link in links if link and not (ROOT / link).exists())
    assert not missing, f"README links to files that do not exist: {missing}"
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    unmapped = sorted(page for page in nav - {"index.md"} if f"docs/{page}" not in links)
    assert not unmapped, f"README's map of the docs lacks: {unmapped}"


def test_file_paths_in_docs_exist():
    stale = []
    for doc in [README, *_pages()]:
        for span in CODE_SPAN.findall(doc.read_text()):
            if FILE_PATH.match(span) and (ROOT / span.split("/")[0]).is_dir() and not (ROOT / span).exists():
                stale.append(f"{doc.relative_to(ROOT)}: `{span}`")
    assert not stale, "docs name files that do not exist (moved or renamed?):\n" + "\n".join(stale)


def test_cited_pages_and_protocol_sections_exist():
    protocol = (DOCS / "protocol.md").read_text()
    sections = set(re.findall(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", protocol, re.M))
    bad = []
    for path in _repo_text_files():
        text = path.read_text(errors="replace")
        where = path.relative_to(ROOT)
        for page in set(DOC_CITATION.findall(text)):
            if not (DOCS / page).exists():
                bad.append(f"{where}: docs/{page} does not exist")
        for tail in PROTOCOL_CITATION.findall(text):
            for number in SECTION.findall(tail):
                if number not in sections:
                    bad.append(f"{where}: docs/protocol.md §{number} is not a section of that page")
    assert not bad, "\n".join(sorted(set(bad)))


def test_nothing_points_outside_the_repository():
    bad = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
           for path in _repo_text_files()
           for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
           if OUTSIDE.search(line)]
    assert not bad, "pointers outside the repository (write the page in docs/ instead):\n" + "\n".join(bad)


def test_command_tables_name_every_command():
    tree = ast.parse((ROOT / "cli" / "main.py").read_text())
    commands = next(ast.literal_eval(node.value) for node in ast.walk(tree)
                    if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "COMMANDS")
    for doc in (README, DOCS / "operations.md"):
        text = doc.read_text()
        missing = sorted(name for name in [*commands, "perf"] if f"`strata {name}" not in text)
        assert not missing, f"{doc.relative_to(ROOT)}'s command table lacks: {missing}"
