"""``make excerpts`` (.ci/sync_excerpts.py) brings a chapter's shown code up to date with mha."""

import inspect

import nbformat

import sync_excerpts  # .ci/sync_excerpts.py (pytest pythonpath)
from mha import MultiHeadAttention, MultiHeadAttentionWrapper

STALE = """class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        check_config(d_in, d_out, context_length, dropout, num_heads, who="the old way")


class MultiHeadAttention(nn.Module):
    def split_heads(self, t):
        return t

    def forward(self, x):
        return x
"""


def test_stale_excerpts_become_the_current_source_and_the_prose_stays(tmp_path):
    path = tmp_path / "chapter.ipynb"
    prose = "Before.\n\n```python\n" + STALE + "```\n\nAfter, with `code`.\n\n```python\nx = 1\n```"
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell(prose), nbformat.v4.new_code_cell("x = 2")]
    )
    nbformat.write(notebook, path)
    sync_excerpts.main([path])
    markdown, code = nbformat.read(path, as_version=4).cells
    # The same methods as the stale block: the wrapper's __init__ alone, the split up to forward.
    wrapper = inspect.getsource(MultiHeadAttentionWrapper)
    wrapper = wrapper[: wrapper.index("\n\n    def forward")] + "\n"
    split = inspect.getsource(MultiHeadAttention)
    split = split[: split.index("\n\n    @classmethod")] + "\n"
    assert markdown.source == (
        f"Before.\n\n```python\n{wrapper}\n\n{split}```\n\nAfter, with `code`.\n\n"
        "```python\nx = 1\n```"
    )
    assert code.source == "x = 2"
