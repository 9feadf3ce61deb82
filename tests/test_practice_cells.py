"""The practice cells: one way to show hints, one copy of each solution, starting code whose
committed feedback asks instead of telling, and no answer on screen before the practice.

The practices are found by their tag (``make execute`` tags each practice's first code cell
``practice``), so a new practice is checked here without editing this file.
"""

import ast
import importlib
import json
import re

import pytest

from conftest import CHAPTERS


def cells(name):
    return json.loads((CHAPTERS / name).read_text())["cells"]


def source(cell):
    return "".join(cell["source"])


def tags(cell):
    return cell["metadata"].get("tags", [])


def text_of(cell):
    """Every text/plain output of a cell, joined."""
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        parts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "".join(parts)


def check_cells(all_cells):
    """For each practice, the cell that runs its check on the starting code: the last code cell
    from the practice's first one up to its hints and solution."""
    found = []
    for i, cell in enumerate(all_cells):
        if "practice" not in tags(cell):
            continue
        last = i
        for j in range(i + 1, len(all_cells)):
            if {"hint", "solution", "practice"} & set(tags(all_cells[j])):
                break
            if all_cells[j]["cell_type"] == "code":
                last = j
        found.append(all_cells[last])
    return found


def check_calls(name):
    return [source(cell).strip().splitlines()[-1] for cell in check_cells(cells(name))]


#: chapter -> the line that runs each of its practices' check, for every chapter with a practice.
PRACTICE = {
    path.name: check_calls(path.name)
    for path in sorted(CHAPTERS.glob("[0-9]*.ipynb"))
    if check_calls(path.name)
}
#: Checks whose feedback on the untouched starting code tells the next step instead of asking a
#: question and pointing to the hints (chapters 4 and 6, written before that rule): what the
#: one-check-core rewrite (issue 35) is to bring under it. Nothing is to be added here.
TELLS_INSTEAD_OF_ASKING = {
    "lookback_heads.check(my_model)",
    "check_gqa_forward(MyGroupedQueryAttention)",
}


def exercise_named(name, all_cells):
    """The exercise a chapter calls ``name``, found through its imports from ``mha`` (each
    from its ``mha.<topic>_exercise``)."""
    for cell in all_cells:
        if cell["cell_type"] != "code":
            continue
        code = "\n".join(
            line for line in source(cell).splitlines() if not line.startswith(("%", "!"))
        )
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mha":
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return getattr(importlib.import_module(node.module), alias.name)
    raise AssertionError(f"{name} is not imported from the mha package")


def test_the_practices_are_found_by_their_tags():
    """The tests below are not vacuous: chapter 1 has a practice, chapter 2 two at least."""
    assert PRACTICE["01_sequential_wrapper.ipynb"] == ["check_wrapper(MyWrapper)"]
    assert len(PRACTICE["02_two_dim_output.ipynb"]) >= 2


@pytest.mark.parametrize("name", PRACTICE)
def test_hints_are_only_shown_by_exercise_hint_cells_with_their_output_hidden(name):
    for cell in cells(name):
        if cell["cell_type"] == "markdown":
            assert "<details" not in source(cell), f"{name}: a hint in bare <details>"
        elif re.search(r"\.hint\(", source(cell)):
            assert re.fullmatch(r"\w+\.hint\([1-9]\)", source(cell).strip())
            assert "hide-output" in cell["metadata"]["tags"]
            assert cell["metadata"]["jupyter"] == {"outputs_hidden": True}
            assert text_of(cell).startswith("Hint ")


@pytest.mark.parametrize("name", PRACTICE)
def test_each_solution_cell_shows_the_exercises_one_copy_of_the_solution(name):
    all_cells = cells(name)
    solutions = [c for c in all_cells if "solution" in tags(c)]
    assert len(solutions) == len(PRACTICE[name]), f"{name}: one solution cell per practice"
    for cell in solutions:
        second_line = source(cell).splitlines()[1]
        exercise_name = re.fullmatch(r"(?:display\()?(\w+)\.solution\(\)\)?", second_line).group(1)
        shown = text_of(cell)
        for line in exercise_named(exercise_name, all_cells).solution_text.splitlines():
            assert line.strip() in shown


@pytest.mark.parametrize("name", PRACTICE)
def test_the_starting_code_fails_with_feedback_that_asks_and_points_to_the_hints(name):
    for call, cell in zip(PRACTICE[name], check_cells(cells(name))):
        feedback = text_of(cell)
        assert "✗ Not yet." in feedback, f"{name}: {call} passes the starting code"
        if call in TELLS_INSTEAD_OF_ASKING:
            continue
        assert "?" in feedback and ("hint(1)" in feedback or "first hint" in feedback), (
            f"{name}: {call} on the starting code does not ask and point to the hints"
        )


@pytest.mark.parametrize(
    "name, listing, practice",
    [
        (
            "01_sequential_wrapper.ipynb",
            "head_outputs = [head(x) for head in self.heads]",
            "class MyWrapper(",
        ),
        ("03_weight_splits.ipynb", "def split_heads(self, t):", "class MyWeightSplit("),
        (
            "07_attention_without_the_score_matrix.ipynb",
            "def query_block(self, q, keys, values, q_start):",
            "class MyTiledAttention(",
        ),
    ],
)
def test_the_book_code_being_practised_is_only_shown_after_the_practice(name, listing, practice):
    """In the prose after the practice, or behind the solution's toggle (its output)."""
    all_cells = cells(name)
    practice_at = next(i for i, c in enumerate(all_cells) if source(c).startswith(practice))
    shown_at = [
        i
        for i, c in enumerate(all_cells)
        if (c["cell_type"] == "markdown" and listing in source(c))
        or ("solution" in c["metadata"].get("tags", []) and listing in text_of(c))
    ]
    assert shown_at and min(shown_at) > practice_at


#: For each chapter whose solution cell shows the book's own code after the exercise's solution:
#: a line of that code which the exercise's solution does not have.
BOOKS_OWN_CODE_BEHIND_THE_TOGGLE = {
    # The book's comment: the solution words it "num_heads tensors, each ...".
    "01_sequential_wrapper.ipynb": "# num_heads tensors of shape (b, num_tokens, d_out)",
    "03_weight_splits.ipynb": "def split_heads(self, t):",
    "06_sharing_keys_values.ipynb": "keys.repeat_interleave(H // G, dim=1)",
    # The docstring: the practice's skeleton has the same signature.
    "07_attention_without_the_score_matrix.ipynb": "The context of the ``rows`` queries from token",
}


@pytest.mark.parametrize("name, listing", BOOKS_OWN_CODE_BEHIND_THE_TOGGLE.items())
def test_the_books_own_code_after_a_practice_waits_behind_the_solutions_toggle(name, listing):
    """Right after the practice it would be a solution in plain view: the solution cell shows
    it, after the exercise's own solution."""
    shown = [c for c in cells(name) if listing in source(c) + text_of(c)]
    assert shown, f"{name} no longer shows {listing!r}"
    for cell in shown:
        tags = cell["metadata"].get("tags", [])
        assert "solution" in tags, f"{name} shows {listing!r} outside the solution's toggle"
        assert text_of(cell).index("Solution") < text_of(cell).index(listing)


def test_chapter_2_asks_nothing_before_its_practice_that_gives_the_answer_away():
    all_cells = cells("02_two_dim_output.ipynb")
    practice_at = next(
        i for i, c in enumerate(all_cells) if "check_two_dim_output(my_wrapper)" in source(c)
    )
    before = " ".join(source(c) + text_of(c) for c in all_cells[:practice_at])
    assert "d_out=1" not in before and "d_out to 1" not in before
    # The width table of the first prediction teaches the rule with other head counts: no row
    # of it is either practice's answer (2 heads of width 1, 4 heads of width 3).
    table = next(text_of(c) for c in all_cells[:practice_at] if "output width" in text_of(c))
    rows = [line.split() for line in table.splitlines() if line.startswith("num_heads=")]
    assert rows and not {row[0] for row in rows} & {"num_heads=2", "num_heads=4"}


def test_no_cell_before_chapter_2s_second_practice_builds_its_answer():
    """The second practice asks for four heads, twelve values wide. Chapter 1 runs three heads
    (six wide, and asks which d_out makes them twelve wide) and chapter 2's first practice two:
    nothing before the second practice, code, output, table or reveal, has four heads."""
    chapter_2 = cells("02_two_dim_output.ipynb")
    checked_at = next(
        i for i, c in enumerate(chapter_2) if "check_twelve_wide_output(my_wrapper12)" in source(c)
    )
    # The section that states the practice: the last practice heading above its check.
    practice_at = max(
        i for i, c in enumerate(chapter_2[:checked_at]) if source(c).startswith("## Practice")
    )
    before = cells("01_sequential_wrapper.ipynb") + chapter_2[:practice_at]
    for cell in before:
        shown = source(cell) + text_of(cell)
        assert not re.search(r"num_heads\s*=\s*4\b", shown), shown
        assert not re.search(r"\b(4|four) heads\b", shown, re.I), shown
        assert not re.search(r"\b4 × 3\b|\b3 × 4\b", shown), shown
        assert "twelve_wide_output.solution()" not in source(cell)


def visible_text(cell):
    """What a reader sees of a cell without opening anything: a hidden cell shows nothing."""
    tags = cell["metadata"].get("tags", [])
    if {"reveal", "solution", "hint", "feedback"} & set(tags):
        return ""
    return source(cell) + text_of(cell)


def test_nothing_right_after_chapter_2s_first_practice_names_its_answer():
    """A reader who scrolls past the practice's solution, up to the next answer, is not told
    which argument it changes, nor to what. What the solution changes, and leaves alone, is
    said in an answer after it, behind its toggle."""
    all_cells = cells("02_two_dim_output.ipynb")
    solution_at = next(
        i for i, c in enumerate(all_cells) if "two_dim_output.solution()" in source(c)
    )
    next_reveal_at = next(
        i for i, c in enumerate(all_cells) if i > solution_at and "reveal" in tags(c)
    )
    after = " ".join(visible_text(c) for c in all_cells[solution_at + 1 : next_reveal_at])
    assert after and not re.search(r"d_out\s*(=|to)\s*1\b|instead of `d_out`", after), after
    answers = [c for c in all_cells[next_reveal_at:] if "reveal" in tags(c)]
    assert any("solution leaves alone" in " ".join(text_of(c).split()) for c in answers)


#: What would tell a reader, before chapter 3's second question, that its ``d_out`` is the total
#: width: its constructor, a weight split built as wide as all the wrapper's heads together, or a
#: sentence saying so.
D_OUT_GIVEAWAYS = re.compile(
    r"check_heads_divide|d_out // num_heads|Linear\(d_in, d_out\)`? for all heads"
    r"|total width|2 \* heads"
    r"|MultiHeadAttention\([^)]*d_out=6"
)


def test_nothing_before_chapter_3s_d_out_answer_says_what_d_out_means_there():
    """Chapter 1, and chapter 3 up to the question's reveal, opened reveals included."""
    chapter_3 = cells("03_weight_splits.ipynb")
    reveal_at = next(
        i for i, c in enumerate(chapter_3) if "reveal(" in source(c) and "d_out_width" in source(c)
    )
    for cell in cells("01_sequential_wrapper.ipynb") + chapter_3[:reveal_at]:
        shown = source(cell) + text_of(cell)
        assert not D_OUT_GIVEAWAYS.search(shown), D_OUT_GIVEAWAYS.search(shown).group(0)
    after = " ".join(source(c) for c in chapter_3[reveal_at:])
    assert D_OUT_GIVEAWAYS.search(after), "the giveaways moved: update D_OUT_GIVEAWAYS"


def test_chapter_2s_variables_do_not_shadow_the_package():
    """A reader who later runs ``import mha.x`` must not lose the wrapper they built."""
    for cell in cells("02_two_dim_output.ipynb"):
        assert not re.search(r"^\s*mha\s*=", source(cell), re.M), source(cell)


def test_chapter_1_shows_a_passed_check_once_inside_its_hidden_solution():
    """Readers learn what success looks like, and no visible cell passes a practice for them."""
    passed = [c for c in cells("01_sequential_wrapper.ipynb") if "✓ Correct." in text_of(c)]
    assert len(passed) == 1
    assert "solution" in passed[0]["metadata"]["tags"]
    assert passed[0]["metadata"]["jupyter"]["outputs_hidden"]
