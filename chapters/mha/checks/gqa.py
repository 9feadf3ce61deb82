"""Chapter 6's exercise: the forward pass of grouped-query attention.

The reader subclasses ``GroupedQueryAttention`` and writes ``forward``. The check builds the
class over several configurations (one group, several, as many as heads) and names the wrong
recipe the output follows (:mod:`.gqa_trial`); once the output is right with dropout, training
mode must drop whole attention weights (:mod:`.dropout`). The book's own class, an inherited
forward, a forward that calls the book's code and a copy of the book's forward are refused.
"""

import ast
import inspect
import textwrap

import torch

from .. import gqa as book
from .classes import class_answer_mistakes
from .config import check_class, trial_mistakes, unexplained
from .core import Exercise, Mistake, never_raises
from .gqa_trial import GroupConfig, GroupRecipe, GroupTrial

#: The configurations, in order: 6 heads in 2 groups and a full-length input first, where most
#: mistakes show; then biases and dropout with a shorter input, one group (multi-query), as
#: many groups as heads (multi-head) and head_dim 1. Every one has d_in != d_out.
GQA_CONFIGS = (
    GroupConfig(
        d_in=5, d_out=12, context_length=6, num_heads=6, num_kv_groups=2, num_tokens=6, seed=1
    ),
    GroupConfig(
        d_in=6,
        d_out=8,
        context_length=8,
        num_heads=4,
        num_kv_groups=2,
        num_tokens=5,
        qkv_bias=True,
        dropout=0.25,
        seed=2,
    ),
    GroupConfig(
        d_in=3, d_out=8, context_length=5, num_heads=4, num_kv_groups=1, num_tokens=5, seed=3
    ),
    GroupConfig(
        d_in=4, d_out=6, context_length=7, num_heads=3, num_kv_groups=3, num_tokens=4, seed=4
    ),
    GroupConfig(
        d_in=10, d_out=8, context_length=4, num_heads=8, num_kv_groups=4, num_tokens=4, seed=5
    ),
)


def _output_follows(*recipes):
    """A detector: the output is what one of ``recipes`` computes from the instance's weights."""
    return lambda trial: any(trial.matches(recipe) for recipe in recipes)


NOT_A_CLASS_MISTAKES = (
    *class_answer_mistakes("check_gqa_forward", "MyGroupedQueryAttention")[:3],
    Mistake(
        "not an nn.Module",
        "{name} is a class, but not an nn.Module. Define it as a subclass of "
        "GroupedQueryAttention, class {name}(GroupedQueryAttention):, and write its forward.",
        lambda answer: not issubclass(answer, torch.nn.Module),
    ),
)


def _forward_source(function):
    """The ``ast.dump`` of a function's code, comments and layout ignored; None if unknown."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except Exception:
        return None
    function_node = tree.body[0]
    if not isinstance(function_node, ast.FunctionDef):
        return None
    body = function_node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # a docstring changes nothing
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def _copies_the_book(cls):
    own = _forward_source(cls.forward)
    return own is not None and own == _forward_source(book.GroupedQueryAttention.forward)


NOT_A_CLASS_MISTAKES += (
    Mistake(
        "the book's own class",
        "This is the book's own GroupedQueryAttention, so there is nothing of yours to check. "
        "Define class MyGroupedQueryAttention(GroupedQueryAttention): and write its forward "
        "yourself, starting from the cell above.",
        lambda cls: cls is book.GroupedQueryAttention,
    ),
    Mistake(
        "forward inherited",
        "{name} does not define forward, so it runs the book's GroupedQueryAttention.forward: "
        "the check would only be checking the book. Write def forward(self, x): inside the class, "
        "with the steps of the pass.",
        lambda cls: cls.forward is book.GroupedQueryAttention.forward,
    ),
    Mistake(
        "no forward",
        "{name} has no forward method at all. Write def forward(self, x): inside the class.",
        lambda cls: cls.forward is torch.nn.Module.forward,
    ),
    Mistake(
        "copies the book's forward",
        "{name}.forward is the book's GroupedQueryAttention.forward, line for line. That one "
        "is already checked; the practice is to write the pass yourself. Start again from an "
        "empty forward in your subclass of GroupedQueryAttention, and use the hints if you "
        "are stuck.",
        _copies_the_book,
    ),
)

CONSTRUCTOR, RAISES, NOT_A_TENSOR, WRONG_SHAPE = trial_mistakes("GroupedQueryAttention", "forward")

GQA_FORWARD_MISTAKES = (
    CONSTRUCTOR,
    Mistake(
        "calls the book's code",
        "Your forward runs the book's own {t.book_code}, so its output is the book's, not "
        "yours. Write the pass from the module's own layers (self.W_query, self.W_key, "
        "self.W_value, self.out_proj), without super().forward and without running another "
        "of the book's attention modules.",
        lambda t: t.book_calls,
    ),
    Mistake(
        "the starting code untouched",
        "Your forward still raises NotImplementedError, as the starting code does: replace "
        "the raise line with the pass itself. The first hint, just below the check, shows "
        "where to start.",
        lambda t: t.stage == "forward" and isinstance(t.error, NotImplementedError),
    ),
    Mistake(
        "torch's own attention",
        "{t.torch_attention_text}",
        lambda t: t.torch_attention,
    ),
    Mistake(
        "projections missing",
        "The check could not use your instance's {names}. It computes the expected output from "
        "the instance's own W_query, W_key and W_value, so keep those layers and their names.",
        lambda t: t.unusable_projections,
    ),
    Mistake(
        "keys at full width",
        "Your W_key maps d_in={t.config.d_in} to {t.key_width} columns, one block per head. In "
        "grouped-query attention keys and values have one block per group: "
        "nn.Linear(d_in, num_kv_groups * head_dim), here {t.config.kv_width} columns. Keep the "
        "constructor of GroupedQueryAttention.",
        lambda t: t.key_width != t.config.kv_width,
    ),
    Mistake(
        "mask not sliced",
        "Your forward works on an input of context_length={t.config.context_length} tokens, "
        "but on {t.config.num_tokens} tokens it raised {t.error_text}. The mask buffer is "
        "context_length × context_length: slice it to the input's length, "
        "self.mask[:num_tokens, :num_tokens], before masked_fill.",
        lambda t: t.stage == "forward" and t.works_on_full_length_input,
    ),
    Mistake(
        "repeated on the token axis",
        "Your forward raised {t.error_text}. The keys or values were repeated on the token "
        "axis, not the block axis: each token's key now appears group_size = "
        "{t.config.group_size} times in a row, so there are {t.config.group_size} × "
        "{t.config.num_tokens} tokens, while the "
        "head axis still has num_kv_groups={t.config.num_kv_groups} blocks against "
        "num_heads={t.config.num_heads} query blocks. Repeat on the block axis: dim=1 once "
        "the split is transposed to (b, num_kv_groups, num_tokens, head_dim).",
        lambda t: t.repeated_on_tokens,
    ),
    Mistake(
        "values not expanded",
        "Your forward raised {t.error_text}, on the line\n    {t.failing_line}\nThe keys were "
        "expanded to one block per head, but the values were not: they still have "
        "num_kv_groups={t.config.num_kv_groups} blocks against num_heads={t.config.num_heads} "
        "heads of attention weights. Expand the values exactly as the keys, "
        "values.repeat_interleave(self.group_size, dim=1).",
        lambda t: t.values_not_expanded,
    ),
    Mistake(
        "keys not expanded",
        "Your forward raised {t.error_text}, on the line\n    {t.failing_line}\nThe queries "
        "have num_heads={t.config.num_heads} blocks, the keys only "
        "num_kv_groups={t.config.num_kv_groups}. Give every head its group's keys first: "
        "keys.repeat_interleave(self.group_size, dim=1), and the same for the values.",
        lambda t: t.keys_not_expanded,
    ),
    Mistake(
        "repeated num_kv_groups times",
        "Your forward raised {t.error_text}. Each key and value block was repeated "
        "num_kv_groups = {t.config.num_kv_groups} times, which gives "
        "{t.config.num_kv_groups} × {t.config.num_kv_groups} blocks for "
        "{t.config.num_heads} heads. A block serves the heads of its group, so repeat it "
        "group_size = num_heads // num_kv_groups = {t.config.group_size} times: "
        "self.group_size.",
        lambda t: t.repeated_by_group_count,
    ),
    Mistake(
        "keys viewed with num_heads",
        "Your forward raised {t.error_text}, on the line\n    {t.failing_line}\nW_key and "
        "W_value give num_kv_groups={t.config.num_kv_groups} blocks of head_dim, "
        "{t.config.kv_width} columns, not num_heads={t.config.num_heads} blocks: view the "
        "keys and values with self.num_kv_groups, then repeat each block once per head of "
        "its group.",
        lambda t: t.kv_viewed_with_num_heads,
    ),
    Mistake(
        "head axes disagree",
        "Your forward raised {t.error_text}. Queries have num_heads={t.config.num_heads} "
        "blocks on the head axis, keys and values num_kv_groups={t.config.num_kv_groups}: "
        "before they meet in a product, repeat each key and value block once per head of its "
        "group, .repeat_interleave(self.group_size, dim=1) on both.",
        lambda t: t.head_axes_disagree,
    ),
    RAISES,
    NOT_A_TENSOR,
    Mistake(
        "dropout in eval mode",
        "Two calls on the same input, in eval mode, gave different outputs: dropout is still "
        "active. Use the module's layer, self.dropout(attn_weights), which switches itself off "
        "in eval mode.",
        lambda t: t.random_in_eval,
    ),
    Mistake(
        "heads not merged",
        "Your forward returned shape {t.output_shape}: the heads are still separate. Transpose "
        "the context back to (b, num_tokens, num_heads, head_dim) and merge the last two axes, "
        "which gives {t.expected_shape}.",
        lambda t: t.shows_heads_unmerged,
    ),
    WRONG_SHAPE,
    Mistake(
        "groups mapped with repeat",
        "Your heads read the wrong key and value blocks: the blocks are cycled, 0, 1, 0, 1, "
        "..., as repeat(1, group_size, 1, 1) cycles them, so head h reads block "
        "h % num_kv_groups. The module's layout gives each block to group_size consecutive "
        "heads, 0, 0, 1, 1, ...: head h reads block h // group_size, which is what "
        "repeat_interleave(group_size, dim=1) gives. (Here {t.config.num_heads} heads share "
        "{t.config.num_kv_groups} blocks.)",
        _output_follows(GroupRecipe(key_map="repeat", value_map="repeat")),
    ),
    Mistake(
        "keys and values mapped differently",
        "Keys and values are mapped to the heads in two different ways, one with "
        "repeat_interleave and one with repeat, so a head scores one group's keys but mixes "
        "another group's values. Use repeat_interleave(self.group_size, dim=1) for both.",
        _output_follows(GroupRecipe(key_map="repeat"), GroupRecipe(value_map="repeat")),
    ),
    Mistake(
        "scaled by the key width",
        "The scores are scaled by √(num_kv_groups × head_dim) = √{t.config.kv_width}, the "
        "width of W_key's whole output. Each head's dot products have only head_dim = "
        "{t.config.head_dim} terms: divide by self.head_dim ** 0.5.",
        _output_follows(GroupRecipe(scale_by="kv_width")),
    ),
    Mistake(
        "scaled by √d_out",
        "The scores are scaled by √d_out = √{t.config.d_out}, but each head's dot products have "
        "only head_dim = {t.config.head_dim} terms. Divide by self.head_dim ** 0.5.",
        _output_follows(GroupRecipe(scale_by="d_out")),
    ),
    Mistake(
        "scaled by the group size",
        "The scores are scaled by √group_size = √{t.config.group_size}. Sharing keys does not "
        "change a head's dot products: each still has head_dim = {t.config.head_dim} terms, so "
        "divide by self.head_dim ** 0.5.",
        _output_follows(GroupRecipe(scale_by="group_size")),
    ),
    Mistake(
        "not scaled",
        "The scores are not scaled. Divide them by √head_dim (self.head_dim ** 0.5) before the "
        "softmax, so that large dot products do not make the softmax nearly one-hot.",
        _output_follows(GroupRecipe(scale_by="nothing")),
    ),
    Mistake(
        "no causal mask",
        "There is no causal mask: every token also attends to the tokens after it. Fill the "
        "future positions of the scores with -inf before the softmax: "
        "attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf).",
        _output_follows(GroupRecipe(causal_mask="none")),
    ),
    Mistake(
        "mask filled with 0",
        "The future positions are filled with 0 instead of -inf. A score of 0 still gets weight "
        "after the softmax (e⁰ = 1); only -inf gives a future token exactly zero weight.",
        _output_follows(GroupRecipe(causal_mask="0 before softmax")),
    ),
    Mistake(
        "mask after softmax",
        "The causal mask is applied after the softmax. Zeroing future weights afterwards leaves "
        "rows that no longer sum to 1, and filling them with -inf gives nan. Mask the scores "
        "with -inf before the softmax.",
        _output_follows(
            GroupRecipe(causal_mask="0 after softmax"),
            GroupRecipe(causal_mask="-inf after softmax"),
        ),
    ),
    Mistake(
        "softmax over the wrong axis",
        "The softmax runs over the wrong axis. Each query's weights over the keys must sum to 1: "
        "torch.softmax(..., dim=-1) on scores of shape (b, num_heads, num_tokens, num_tokens).",
        _output_follows(*(GroupRecipe(softmax_dim=dim) for dim in (-2, 1, 0))),
    ),
    Mistake(
        "heads merged without transposing back",
        "The heads were merged straight from (b, num_heads, num_tokens, head_dim), so "
        "one head's rows land where other tokens belong. Bring the heads back behind "
        "the tokens with .transpose(1, 2) first, then reshape to (b, num_tokens, d_out).",
        _output_follows(GroupRecipe(transpose_back=False)),
    ),
    Mistake(
        "out_proj not applied",
        "The forward never applies out_proj. After merging the heads, return "
        "self.out_proj(context): the output projection is part of the pass.",
        _output_follows(GroupRecipe(out_proj=False)),
    ),
    unexplained(
        "queries split into num_heads blocks, keys and values into num_kv_groups; both "
        "repeated with repeat_interleave(group_size, dim=1); scores masked with -inf; softmax "
        "over the last axis after dividing by √head_dim; heads merged; out_proj."
    ),
)

#: Asked once the output in eval mode is right, in a configuration built with dropout.
TRAINING_MISTAKES = (
    Mistake(
        "raises in training mode",
        "Your output is right in eval mode, but in training mode (module.train()) your "
        "forward raised {t.training_error_text}. The check runs it in both modes.",
        lambda t: t.dropout_place == "raises",
    ),
    Mistake(
        "no dropout in training",
        "Your output is right in eval mode, but in training mode it is the same: no dropout, "
        "although the module was built with dropout={t.config.dropout}. Apply "
        "self.dropout to the attention weights after the softmax; the layer acts only in "
        "training mode.",
        lambda t: t.dropout_place == "none",
    ),
    Mistake(
        "the same dropout every call",
        "In training mode two calls on the same input gave the same output, different from "
        "eval mode: the same positions are dropped every time. Dropout draws a new random "
        "mask on each call: use self.dropout (an nn.Dropout) and do not reseed inside "
        "forward.",
        lambda t: t.dropout_place == "same every call",
    ),
    Mistake("dropout in the wrong place", "{t.dropout_text}", lambda t: t.dropout_misplaced),
)


@never_raises
def check_gqa_forward(cls):
    """Check a grouped-query attention class: build it over several configurations and compare
    its output with a reference computed from each instance's own layers."""
    dropout = next(c.dropout for c in GQA_CONFIGS if c.dropout)
    return check_class(
        cls,
        NOT_A_CLASS_MISTAKES,
        GroupTrial,
        GQA_CONFIGS,
        GQA_FORWARD_MISTAKES,
        TRAINING_MISTAKES,
        f"In eval mode your forward pass matches the reference, computed from each instance's "
        f"own layers, in all {len(GQA_CONFIGS)} configurations: one group (multi-query), 2 and "
        "4 groups, as many groups as heads (multi-head), with biases, and with inputs shorter "
        f"than context_length. Built with dropout={dropout}, in training mode it drops whole "
        "attention weights (token 0's context is 0 or its value / (1 - p), the mean of 48 "
        "calls is the eval output), and in eval mode nothing.",
    )


gqa_forward = Exercise(
    checker=check_gqa_forward,
    hints=(
        "Project and split as in chapter 3, but with two block counts. self.W_query(x) has "
        "self.num_heads blocks of self.head_dim columns: view it as (b, num_tokens, "
        "self.num_heads, self.head_dim). self.W_key(x) and self.W_value(x) have only "
        "self.num_kv_groups blocks. Then .transpose(1, 2) all three, so the blocks come "
        "before the tokens.",
        "Now give every head the keys and values of its group. Head h belongs to group "
        "h // self.group_size: the first group_size heads share block 0, the next group_size "
        "block 1, and so on. One call on the block axis (dim=1) repeats each block in place, "
        "group_size times; the predict-and-reveal above compared it with another that cycles.",
        "From here it is chapter 3's attention: scores queries @ keys.transpose(2, 3); fill "
        "self.mask[:num_tokens, :num_tokens] with -torch.inf; softmax over the last axis after "
        "dividing by self.head_dim ** 0.5; self.dropout; mix the values; transpose back, "
        "reshape to (b, num_tokens, self.d_out); return self.out_proj(context).",
    ),
    solution_code=textwrap.dedent(
        """\
        class MyGroupedQueryAttention(GroupedQueryAttention):
            def forward(self, x):
                b, num_tokens, _ = x.shape
                queries = self.W_query(x)  # (b, T, d_out)
                keys = self.W_key(x)  # (b, T, num_kv_groups * head_dim)
                values = self.W_value(x)  # (b, T, num_kv_groups * head_dim)

                # Queries: one block per head. Keys, values: one per group.
                H, G = self.num_heads, self.num_kv_groups
                queries = queries.view(b, num_tokens, H, self.head_dim)
                keys = keys.view(b, num_tokens, G, self.head_dim)
                values = values.view(b, num_tokens, G, self.head_dim)
                queries = queries.transpose(1, 2)  # (b, H, T, head_dim)
                keys = keys.transpose(1, 2)  # (b, G, T, head_dim)
                values = values.transpose(1, 2)  # (b, G, T, head_dim)

                # Each group's block once per head of the group, in place.
                keys = keys.repeat_interleave(self.group_size, dim=1)
                values = values.repeat_interleave(self.group_size, dim=1)
                # keys and values are now (b, H, T, head_dim)

                attn_scores = queries @ keys.transpose(2, 3)  # (b, H, T, T)
                future = self.mask[:num_tokens, :num_tokens]  # (T, T)
                attn_scores = attn_scores.masked_fill(future, -torch.inf)
                scaled = attn_scores / self.head_dim**0.5
                attn_weights = self.dropout(torch.softmax(scaled, dim=-1))

                context = attn_weights @ values  # (b, H, T, head_dim)
                context = context.transpose(1, 2)  # (b, T, H, head_dim)
                context = context.reshape(b, num_tokens, self.d_out)
                return self.out_proj(context)  # (b, T, d_out)


        check_gqa_forward(MyGroupedQueryAttention)
        """
    ),
)
