"""The "Run this page" button's kernel settings (_ext/live_code.py): Binder from _config.yml's
repository by default, a Jupyter server of your own when MHA_LIVE_SERVER_URL is set."""

import importlib.util
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
THEME = {
    "repository_url": CONFIG["repository"]["url"],
    "repository_branch": CONFIG["repository"]["branch"],
    "launch_buttons": CONFIG["launch_buttons"],
}


def live_code():
    spec = importlib.util.spec_from_file_location("live_code", ROOT / "_ext" / "live_code.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_by_default_the_kernel_comes_from_binder_from_this_repository():
    settings = live_code().live_settings(THEME, environ={})
    org_repo = CONFIG["repository"]["url"].removeprefix("https://github.com/")
    assert settings["binder"] == {
        "url": CONFIG["launch_buttons"]["binderhub_url"],
        "repo": org_repo,
        "ref": CONFIG["repository"]["branch"],
    }
    assert "server" not in settings
    assert settings["timeout"] == live_code().BINDER_TIMEOUT_S


def test_a_server_set_at_build_time_replaces_binder():
    environ = {"MHA_LIVE_SERVER_URL": " http://127.0.0.1:8888 ", "MHA_LIVE_SERVER_TOKEN": "t0k"}
    settings = live_code().live_settings(THEME, environ=environ)
    assert settings["server"] == {"url": "http://127.0.0.1:8888/", "token": "t0k"}
    assert "binder" not in settings
    assert settings["timeout"] == live_code().SERVER_TIMEOUT_S


def test_the_book_loads_the_extension_and_keeps_sphinx_thebe_off():
    sphinx = CONFIG["sphinx"]
    assert sphinx["local_extensions"]["live_code"] == "_ext"
    assert "live_code" in sphinx["config"]["extensions"]
    assert "sphinx_thebe" not in sphinx["config"]["extensions"]
