"""Chapter 2's catalogue, :data:`MISTAKES`: the wrapper's arguments, heads and joins gone wrong."""

import torch

from .catalogue import Buggy
from .core import Mistake
from .joins import JOINED, NO_OUTPUT, NOT_X, ONE_SEQUENCE, RAISED, REORDERED, SHARED
from .reference import CORRECT, head_output


def rescaled(a, scale):
    """The heads side by side, each scaling its scores by ``scale(a)`` instead of √d_out."""
    return torch.cat([head_output(h, a.x, CORRECT.but(scale=scale(a))) for h in a.heads], -1)


# fmt: off
#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
MISTAKES = (
    Mistake("not a module", "{t.check} needs the wrapper you built (a torch.nn.Module), but it "
            "was given {given}. Pass the wrapper itself, not its output nor its class: "
            "{t.check}(my_wrapper), not {t.check}(my_wrapper(batch)).",
            lambda a: a.module is None),
    Mistake("not the wrapper", "Your {got} does not have the heads MultiHeadAttentionWrapper "
            "builds: a list self.heads of attention heads, each with W_query, W_key and W_value "
            "of one width. Build a MultiHeadAttentionWrapper with {t.heads} heads: change only "
            "the arguments of the call.", lambda a: not a.heads or not a.as_built()),
    Mistake("the starting wrapper", "This is the starting wrapper, unchanged: {num_heads} heads "
            "and {width}-dimensional context vectors, where the exercise asks for {t.heads} heads "
            "and {t.width}-dimensional ones. What decides the width of the wrapper's output? "
            "{t.exercise}.hint(1) starts from there.",
            lambda a: (a.num_heads, a.head_width, a.d_in, a.context_length) == (2, 2, 3, 6)
            and a.joined()),
    Mistake("the input's arguments changed", "Your heads take tokens {d_in} values wide "
            "(d_in={d_in}), at most {context_length} (context_length={context_length}), but the "
            "example has 6 tokens 3 values wide, batch shape (2, 6, 3): d_in and context_length "
            "describe the input, not the output's width. Keep d_in=3 and context_length at 6 (or "
            "more).", lambda a: a.d_in != 3 or a.context_length < 6),
    Mistake("num_heads changed", "Your wrapper has {heads_phrase}, but the exercise asks for "
            "{t.heads}: keep num_heads={t.heads}, and set each head's width with d_out.",
            lambda a: a.num_heads != a.t.heads),
    SHARED, ONE_SEQUENCE, NOT_X, RAISED, *JOINED, REORDERED,
    Mistake("sees later tokens", "Your wrapper's output for a token changes when a later token "
            "does: a head's causal mask was removed or changed. Keep each CausalAttention's mask "
            "as built.", lambda a: a.peeks()),
    *(Buggy("scale changed", "Your heads scale their scores by another number than √d_out, the "
            "square root of each head's own key width (not the whole output's, nor d_in, nor "
            "d_out itself): keep CausalAttention's forward.", lambda a, s=s: rescaled(a, s))
      for s in (lambda a: 1, lambda a: a.head_width, lambda a: a.width**0.5,
                lambda a: a.d_in**0.5)),  # none, d_out, the whole output's width, d_in
    Mistake("values thrown away", "Your output keeps only {width} of the {right_width} values "
            "your {num_heads} heads make: the rest were sliced away. Make the heads narrower with "
            "d_out, not their output.", lambda a: a.columns_kept()),
    Mistake("heads mixed after torch.cat", "Your output mixes the heads' values after torch.cat "
            "(a projection such as chapter 3's out_proj): every column blends heads. This wrapper "
            "has none: set d_out instead.", lambda a: a.mixed()),
    NO_OUTPUT,  # not a tensor, or another shape the mistakes above do not explain
    Mistake("gradient or state", "{after}", lambda a: a.joined() and a.after),  # runs' words
    Mistake("wrong width", "Your context vectors are {width}-dimensional, not {t.width}: d_out "
            "is each head's width, so num_heads × d_out = {num_heads} × {head_width} = {width}. "
            "How many values must each of the {t.heads} heads give? {t.exercise}.hint(1) starts "
            "there.", lambda a: a.joined() and a.width != a.t.width),
    Mistake("not the heads side by side", "Head {off}'s columns in your output are not what it "
            "computes from its own weights (causal attention, scaled by √d_out): keep the class "
            "and its heads as built, and change only the arguments of the call: d_out is each "
            "head's width.", lambda a: not a.joined()))
# fmt: on
