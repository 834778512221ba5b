"""LICENSE and CITATION.cff: the license pyproject declares, a citation of the package and of the
paper it reproduces, in step with the package's version."""

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
