"""The docs site builds with ``mkdocs build --strict`` (a broken link or anchor fails it), and the
README's links point at files that exist."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_site_builds_strictly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "views" / "aggregate" / "index.html").exists()


def test_every_docs_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert pages and [p for p in pages if f": {p}" not in nav] == []


def test_the_readme_links_to_files_that_exist_and_stays_short():
    readme = (ROOT / "README.md").read_text()
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)#][^)]*)\)", readme) if "://" not in t]
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []
    assert len(readme.splitlines()) <= 120  # two screens: the rest is in docs/


def test_the_reference_page_is_generated_from_the_code():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_validated_model_config_is_in_the_reference_with_its_default():
    from dataclasses import fields

    from dbt_incremental_mv.config import MODEL_CONFIGS, FastRefreshConfig

    documented = {key.name: key.default.strip("`") for key in MODEL_CONFIGS}
    for field in fields(FastRefreshConfig):
        assert field.name in documented, field.name
        if field.default is not None:
            assert documented[field.name] == str(field.default).lower(), field.name


def test_user_pages_hold_no_session_notes():
    """The site is a manual: dated diaries and issue numbers belong in git and the issue notes."""
    diary = re.compile(r"\bissue \d+|this session|an hour later|the night|yesterday|this morning|earlier today", re.I)
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
        for page in sorted((ROOT / "docs").rglob("*.md"))
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if diary.search(line)
    ]
    assert found == []
