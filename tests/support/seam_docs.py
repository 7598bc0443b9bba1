"""Seam blocks from documentation: the prose of 18 pinned Python projects' source distributions.

Each sdist is pinned by version and sha256 (:data:`PINNED_SDISTS`) and read as a tar file. Its
``doc``/``docs`` folders' reStructuredText and Markdown files are read, changelogs, licences,
contributor guides and release notes left out, through
:func:`tests.support.doc_prose.doc_paragraphs`. None of these projects is in the static model's
training corpus (worker/model_making/ training_corpus.py) or read by tests/support/corpus.py
(installed packages' descriptions).

Split by project: nine projects are ``tune`` and nine ``report``, both halves mixing large and
small documentations of web frameworks, tooling and libraries. A project is one *source*: two
blocks of one project never meet in a document. Blocks:
:func:`tests.support.seam_blocks.paragraph_runs` over each file, at most
:data:`BLOCKS_PER_FILE` per file, each project's blocks in a fixed pseudo-random order (so its
files interleave).
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from tests.support.doc_prose import doc_paragraphs
from tests.support.seam_blocks import (
    DEFAULT_CACHE,
    Block,
    PinnedFile,
    digest,
    fetch,
    paragraph_runs,
)
from tests.support.splits import Split

MAX_BLOCK_CHARS = 1800
BLOCKS_PER_FILE = 3

_DOC_FOLDERS = {"doc", "docs", "documentation"}
_NOT_PROSE_FILES = (
    "change", "history", "licen", "author", "contribut", "conduct", "release", "news",
    "whatsnew", "security", "readme", "thanks", "credits", "migrat", "deprecat", "upgrad",
    "glossary",
)  # fmt: skip


def _sdist(requirement: str, sha256: str) -> PinnedFile:
    name, version = requirement.split("==")
    return PinnedFile(requirement, f"{name}-{version}.tar.gz", sha256, sdist=True)


PINNED_SDISTS: dict[Split, tuple[PinnedFile, ...]] = {
    "tune": (
        _sdist(
            "attrs==24.2.0",
            "5cfb1b9148b5b086569baec03f20d7b6bf3bcacc9a42bebf87ffaaca362f6346",
        ),
        _sdist(
            "black==24.10.0",
            "846ea64c97afe3bc677b761787993be4991810ecc7a4a937816dd6bddedc4875",
        ),
        _sdist(
            "celery==5.4.0",
            "504a19140e8d3029d5acad88330c541d4c3f64c789d85f94756762d8bca7e706",
        ),
        _sdist(
            "click==8.1.7",
            "ca9853ad459e787e2192211578cc907e7594e294c7ccc834310722b41b9ca6de",
        ),
        _sdist(
            "flask==3.1.0",
            "5f873c5184c897c8d9d1b05df1e3d01b14910ce69607a117bd3277098a5836ac",
        ),
        _sdist(
            "jinja2==3.1.4",
            "4a3aee7acbbe7303aede8e9648d13b8bf88a429282aa6122a993f0ac800cb369",
        ),
        _sdist(
            "pytest==8.3.4",
            "965370d062bce11e73868e0335abac31b4d3de0e82f4007408d242b4f8610761",
        ),
        _sdist(
            "sphinx==8.1.3",
            "43c1911eecb0d3e161ad78611bc905d1ad0e523e4ddc202a58a821773dc4c927",
        ),
        _sdist(
            "werkzeug==3.1.3",
            "60723ce945c19328679790e3282cc758aa4a6040e4bb330f53d30fa546d44746",
        ),
    ),
    "report": (
        _sdist(
            "aiohttp==3.11.9",
            "a9266644064779840feec0e34f10a89b3ff1d2d6b751fe90017abcad1864fa7c",
        ),
        _sdist(
            "coverage==7.6.8",
            "8b2b8503edb06822c86d82fa64a4a5cb0760bb8f31f26e138ec743f422f37cfc",
        ),
        _sdist(
            "docutils==0.21.2",
            "3a6b18732edf182daa3cd12775bbb338cf5691468f91eeeb109deff6ebfa986f",
        ),
        _sdist(
            "mypy==1.13.0",
            "0291a61b6fbf3e6673e3405cfcc0e7650bebc7939659fdca2702958038bd835e",
        ),
        _sdist(
            "pip==24.3.1",
            "ebcb60557f2aefabc2e0f918751cd24ea0d56d8ec5445fe1807f1d2109660b99",
        ),
        _sdist(
            "pyramid==2.0.2",
            "372138a738e4216535cc76dcce6eddd5a1aaca95130f2354fb834264c06f18de",
        ),
        _sdist(
            "scrapy==2.12.0",
            "d66d6e76009b12447604196875a463b61d10721140032a8084a0a52df7f4788f",
        ),
        _sdist(
            "tornado==6.4.2",
            "92bad5b4746e9879fd7bf1eb21dce4e3fc5128d71601f80005afa39237ad620b",
        ),
        _sdist(
            "trio==0.27.0",
            "1dcc95ab1726b2da054afea8fd761af74bad79bd52381b84eae408e983c76831",
        ),
    ),
}


def is_prose_file(member: str) -> bool:
    parts = member.split("/")
    name = parts[-1].lower()
    if not name.endswith((".rst", ".md", ".txt")):
        return False
    folders = [p.lower() for p in parts[1:-1]]
    if not _DOC_FOLDERS & set(folders):
        return False
    return not any(word in part for part in [name, *folders] for word in _NOT_PROSE_FILES)


def project_blocks(sdist: Path, project: str) -> list[Block]:
    """Every block of one sdist's documentation, in its fixed pseudo-random order."""
    found: list[Block] = []
    with tarfile.open(sdist) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not member.isfile() or not is_prose_file(member.name):
                continue
            handle = tar.extractfile(member)
            if handle is None:
                continue
            source = handle.read().decode("utf-8", errors="replace")
            paragraphs = doc_paragraphs(member.name, source)
            for text in paragraph_runs(member.name, paragraphs, MAX_BLOCK_CHARS, BLOCKS_PER_FILE):
                found.append(Block(project, member.name, text))
    return sorted(found, key=lambda b: digest(b.where, b.text))


def docs_blocks(split: Split, cache: Path = DEFAULT_CACHE) -> dict[str, list[Block]]:
    """Every block of the split's projects, by project."""
    out: dict[str, list[Block]] = {}
    for pin in PINNED_SDISTS[split]:
        project = pin.requirement.split("==")[0]
        out[project] = project_blocks(fetch(pin, cache), project)
    return out
