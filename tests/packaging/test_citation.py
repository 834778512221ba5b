"""LICENSE, CITATION.cff and CHANGELOG.md: the license pyproject declares, a citation of the
package and of the paper it reproduces, in step with the package's version and the release the
changelog dates."""

import datetime
import re

import yaml
from config_helpers import pyproject
from conftest import REPO

import repro

PAPER = "Beyond Linearity in Attention Projections: The Case for Nonlinear Queries"


def test_the_license_is_the_one_pyproject_declares():
    project = pyproject()["project"]
    assert project["license"] == {"text": "MIT"}
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "the repro contributors" in text


def test_citation_cff_cites_the_package_and_the_paper():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["title"].startswith("repro") and cff["license"] == "MIT"
    assert cff["version"] == repro.__version__
    (paper,) = cff["references"]
    assert paper["title"] == PAPER and paper["year"] == 2026
    assert paper["authors"] == [{"family-names": "Karbevski", "given-names": "Marko"}]
    assert paper["doi"] == "10.48550/arXiv.2603.13381"


def test_the_version_is_one_release_of_the_changelog_and_the_citation():
    """pyproject.toml, repro.__version__, CITATION.cff's version and date-released, and the newest
    release of CHANGELOG.md (Keep a Changelog: `## [X.Y.Z] - YYYY-MM-DD`) name one release."""
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$",
                          (REPO / "CHANGELOG.md").read_text(), re.M)  # fmt: skip
    assert releases, "CHANGELOG.md: no release heading `## [X.Y.Z] - YYYY-MM-DD`"
    version, date = releases[0]
    assert pyproject()["project"]["version"] == repro.__version__ == cff["version"] == version
    assert cff["date-released"] in (date, datetime.date.fromisoformat(date))
