"""The book's configuration: settings that silently break links or builds when wrong.

Binder's agreement with the book (pins, Python version, the README badge) is checked in
``test_binder_config.py``; the pins themselves in ``test_package.py``.
"""

import yaml

from conftest import ROOT

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def test_launch_buttons_use_mybinder_and_colab():
    assert CONFIG["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    # Colab opens a chapter alone; its first code cell installs mha (test_standalone_chapters.py).
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"


def test_build_artefacts_and_environments_stay_out_of_the_book():
    for pattern in (".venv", "_build", "**/.ipynb_checkpoints"):
        assert pattern in CONFIG["exclude_patterns"]
    # The HTML shows the nbval-verified outputs.
    assert CONFIG["execute"]["execute_notebooks"] == "off"
