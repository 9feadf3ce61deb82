"""The book's configuration: settings that silently break links or builds when wrong.

Binder's agreement with the book (pins, Python version, the README badge) is checked in
``test_binder_config.py``.
"""

import re

import yaml
from conftest import ROOT

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def test_launch_buttons_use_mybinder_and_not_colab():
    assert CONFIG["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert "colab_url" not in CONFIG["launch_buttons"]  # Colab cannot get the mha package


def test_build_artefacts_and_environments_stay_out_of_the_book():
    for pattern in (".venv", "_build", "**/.ipynb_checkpoints"):
        assert pattern in CONFIG["exclude_patterns"]
    assert (
        CONFIG["execute"]["execute_notebooks"] == "off"
    )  # the HTML shows the nbval-verified outputs


def test_requirements_pin_every_package_exactly_and_torch_at_2_13_0():
    lines = [
        line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
    ]
    packages = [line for line in lines if line and not line.startswith("-")]
    unpinned = [line for line in packages if not re.fullmatch(r"[\w.\-]+==[\w.+]+", line)]
    assert packages and not unpinned, f"not pinned with ==: {unpinned}"
    assert "torch==2.13.0" in packages
