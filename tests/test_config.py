"""The book's configuration: settings that silently break links or builds when wrong."""

import re

import yaml

from conftest import ROOT

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def test_launch_buttons_point_at_branch_main_of_the_one_configured_repository():
    assert CONFIG["repository"]["branch"] == "main"
    assert CONFIG["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert "colab_url" not in CONFIG["launch_buttons"]  # Colab cannot get the mha package


def test_readme_links_derive_from_the_configured_repository():
    org_repo = CONFIG["repository"]["url"].removeprefix("https://github.com/")
    readme = (ROOT / "README.md").read_text()
    for link in re.findall(r"https://mybinder\.org/v2/gh/([^)\s]+)", readme):
        assert link.startswith(f"{org_repo}/main"), f"README links to {link}, not {org_repo}@main"


def test_build_artefacts_and_environments_stay_out_of_the_book():
    for pattern in (".venv", "_build", "**/.ipynb_checkpoints"):
        assert pattern in CONFIG["exclude_patterns"]
    assert CONFIG["execute"]["execute_notebooks"] == "off"  # the HTML shows the nbval-verified outputs


def test_requirements_pin_everything_exactly_and_binder_agrees():
    def pins(path):
        lines = [l.split("#")[0].strip() for l in path.read_text().splitlines()]
        return dict(l.split("==") for l in lines if l and not l.startswith("-"))

    root = pins(ROOT / "requirements.txt")
    assert root["torch"] == "2.13.0"
    assert all(re.fullmatch(r"[\w.]+", v) for v in root.values())
    for name, version in pins(ROOT / "binder" / "requirements.txt").items():
        assert root.get(name) == version, f"binder pins {name}=={version}, the book uses {root.get(name)}"
