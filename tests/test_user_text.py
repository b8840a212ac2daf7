"""What users read names no document they do not have.

Papers are cited by their authors, year and title; the project's working
notes (numbered papers, implementation notes, issue numbers, folders outside
the repository) must not reach the README, the docs, the benchmarks or the
package's docstrings and messages.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

INTERNAL = re.compile(
    r"\bseeds?\s*#?\s*\d{3}\b"            # "seed 002"
    r"|\bspecs?\s*#?\s*\d{3}\b"           # "spec 000"
    r"|\bspecs?\s+(?:sections?|tables?|pitfalls?|P\d)"  # "spec section 6.7", "spec Tables 8/9"
    r"|\.\./shared\b"                     # a folder outside the repository
    r"|\b(?:seeds|specs)/"                # the notes' folders
    r"|\bissues?\s+#?\d+\b"               # "Issue 3"
    r"|\bthe\s+issue'?s\b"                 # "the target"
    r"|\b(?:what\s+the|skrank'?s)\s+goals\b",  # the project's history, not the library
    re.IGNORECASE,
)


def _user_files():
    yield ROOT / "README.md"
    for folder, patterns in (("doc", ("*.rst", "*.py", "*.txt", "*.md")),
                             ("skrank", ("*.py",)), ("benchmarks", ("*.py",))):
        for pattern in patterns:
            yield from sorted((ROOT / folder).rglob(pattern))


def test_internal_reference_pattern_catches_the_known_forms():
    for text in ("as in seed 002", "Spec 000 section 6.7", "see Issue 3", "--data-dir ../shared/data",
                 "the seeds/ folder", "(SOREL, seed 003)",
                 "spec section 6.3", "from spec Tables 8/9", "spec P15", "the issue's convex risk",
                 "What the goals were", "whether skrank's goals are met"):
        assert INTERNAL.search(text), text
    for text in ("random seed 0", "with seed 0", "random_state=0", "Issue a warning", "section 3.2"):
        assert not INTERNAL.search(text), text


@pytest.mark.parametrize("path", [p for p in _user_files() if p.is_file() and "_build" not in p.parts],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_internal_reference_reaches_users(path):
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if INTERNAL.search(line)]
    assert not found, "internal references in user-facing text:\n" + "\n".join(found)



def test_fit_time_claims_come_from_one_benchmark_run():
    """The README and the docs state the fit times of one ``default_speed.py --write-docs`` run."""
    sentence = (ROOT / "doc" / "fit_times_sentence.inc").read_text().strip()
    assert re.fullmatch(r"On the \d+ tables .* median \d+\.\d to \d+\.\d times LogisticRegression's time, "
                        r"and at most \d+\.\d times \(\w+ on \w+\)\.", sentence), sentence
    readme = (ROOT / "README.md").read_text()
    region = re.search(r"<!-- fit-times: [^>]*-->\n(.*?)\n<!-- /fit-times -->", readme, flags=re.S)
    assert region and region.group(1).strip() == sentence
    for page in ("index.rst", "benchmarks.rst"):
        assert ".. include:: fit_times_sentence.inc" in (ROOT / "doc" / page).read_text(), page
    table = (ROOT / "doc" / "fit_times.inc").read_text()
    assert "benchmarks/default_speed.py --write-docs" in table
    # no other statement of a default fit's time against LogisticRegression's
    for path in (ROOT / "README.md", ROOT / "doc" / "index.rst", ROOT / "doc" / "benchmarks.rst"):
        text = path.read_text().replace(sentence, "")
        assert not re.search(r"median [\w.\-]+ (?:to [\w.]+ )?times", text), path.name
