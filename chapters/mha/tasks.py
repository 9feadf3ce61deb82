"""Chapter 4's task: look back at several fixed offsets at once.

Every sequence is random tokens. At each position the model must name the
token ``k`` places back, for every ``k`` in ``offsets``: one readout per
offset. Each readout needs attention to one other position, so the task needs
as many attention patterns at the same time as it has offsets. The model is
the book's ``MultiHeadAttention`` between a token-plus-position embedding and
one linear readout per offset; nothing else can move information between
positions.
"""

from dataclasses import dataclass

import torch
from torch import nn

from .attention import MultiHeadAttention


@dataclass(frozen=True)
class LookbackTask:
    """Random sequences; at every position, the tokens ``offsets`` places back."""

    offsets: tuple = (1, 2, 3, 4)
    vocab_size: int = 8
    num_tokens: int = 10
    train_size: int = 256
    eval_size: int = 1000

    def __post_init__(self):
        offsets = self.offsets
        if (
            not isinstance(offsets, tuple)
            or not offsets
            or not all(isinstance(k, int) and k >= 1 for k in offsets)
            or len(set(offsets)) != len(offsets)
        ):
            raise ValueError(
                "LookbackTask: offsets must be a tuple of distinct positive "
                f"integers, e.g. (1, 3); got {offsets!r}."
            )
        if max(offsets) >= self.num_tokens:
            raise ValueError(
                f"LookbackTask: the largest offset, {max(offsets)}, must be "
                f"smaller than num_tokens={self.num_tokens}, or no position "
                "has a token that far back. Use more tokens or a smaller "
                "offset."
            )

    @property
    def first_scored(self):
        """The first position that has a token at every offset behind it."""
        return max(self.offsets)

    def sequences(self, count, seed):
        """``count`` random sequences from their own seeded generator."""
        generator = torch.Generator().manual_seed(seed)
        shape = (count, self.num_tokens)
        return torch.randint(0, self.vocab_size, shape, generator=generator)

    def train_set(self):
        """The fixed training sequences: every step sees all of them."""
        return self.sequences(self.train_size, seed=1)

    def eval_set(self):
        """The fixed evaluation sequences, never trained on."""
        return self.sequences(self.eval_size, seed=2)

    def targets(self, tokens):
        """``(b, num_tokens, len(offsets))``: the token ``k`` places back.

        Positions before ``first_scored`` get a wrapped-around token; the
        loss and the accuracy skip them.
        """
        looks = [tokens.roll(k, dims=1) for k in self.offsets]
        return torch.stack(looks, dim=-1)  # (b, num_tokens, num_offsets)

    def loss(self, logits, tokens):
        """Cross-entropy over every scored position and every offset.

        The mean over the same answers as ``cross_entropy`` on rows of
        ``vocab_size`` scores would give, laid out for speed: ``cross_entropy``
        takes the classes on dim 1, so all answers go in as one batch of
        shape ``(1, vocab, b, scored, num_offsets)`` and the log-softmax runs
        across thousands of answers at once. Along rows of 8 scores, PyTorch's
        AVX-512 kernels spent about a fifth of a training step on it (1.2 of
        6 ms, measured on a 2-core AMD EPYC).
        """
        start = self.first_scored
        scored = logits[:, start:]  # (b, scored, num_offsets, vocab)
        wanted = self.targets(tokens)[:, start:]  # (b, scored, num_offsets)
        one_batch = scored.permute(3, 0, 1, 2).unsqueeze(0)  # (1, vocab, b, scored, num_offsets)
        return nn.functional.cross_entropy(one_batch, wanted.unsqueeze(0))

    def accuracy(self, model, tokens=None):
        """Per offset, the share of scored positions the model gets right."""
        tokens = self.eval_set() if tokens is None else tokens
        start = self.first_scored
        with torch.no_grad():
            guesses = model(tokens).argmax(dim=-1)[:, start:]
        right = guesses == self.targets(tokens)[:, start:]
        return right.float().mean(dim=(0, 1))  # (num_offsets,)


class LookbackModel(nn.Module):
    """Embeddings, the book's ``MultiHeadAttention``, one readout per offset.

    There is no residual connection and no MLP: whatever a readout learns
    about other positions came through the attention heads.
    """

    def __init__(self, task, d_model, num_heads):
        super().__init__()
        self.task = task
        self.token_embedding = nn.Embedding(task.vocab_size, d_model)
        self.position_embedding = nn.Embedding(task.num_tokens, d_model)
        self.attention = MultiHeadAttention(
            d_in=d_model,
            d_out=d_model,
            context_length=task.num_tokens,
            dropout=0.0,
            num_heads=num_heads,
        )
        num_outputs = len(task.offsets) * task.vocab_size
        self.readout = nn.Linear(d_model, num_outputs)

    def embed(self, tokens):
        """Token embedding plus position embedding: ``(b, T, d_model)``."""
        positions = self.position_embedding.weight[: tokens.shape[1]]
        return self.token_embedding(tokens) + positions  # (b, T, d_model)

    def forward(self, tokens):
        b, num_tokens = tokens.shape
        context = self.attention(self.embed(tokens))  # (b, T, d_model)
        logits = self.readout(context)  # (b, T, num_offsets * vocab)
        shape = (b, num_tokens, len(self.task.offsets), -1)
        return logits.view(shape)  # (b, T, num_offsets, vocab)

    def attention_weights(self, tokens):
        """Each head's attention weights, ``(b, num_heads, T, T)``.

        Recomputed from the attention module's own layers, step by step as
        its forward computes them.
        """
        attn = self.attention
        x = self.embed(tokens)  # (b, T, d_model)
        with torch.no_grad():
            queries = attn.split_heads(attn.W_query(x))  # (b, h, T, head_dim)
            keys = attn.split_heads(attn.W_key(x))  # (b, h, T, head_dim)
            scores = queries @ keys.transpose(2, 3)  # (b, h, T, T)
            T = tokens.shape[1]
            future = attn.mask[:T, :T].bool()  # (T, T)
            scores = scores.masked_fill(future, -torch.inf)
            return torch.softmax(scores / attn.head_dim**0.5, dim=-1)


def weight_by_offset(weights, first_scored):
    """Average attention weight at each offset: ``(num_heads, T)``.

    ``weights`` is ``(b, num_heads, T, T)``. Entry ``[h, k]`` is head ``h``'s
    mean weight on the key ``k`` places before its query, over the scored
    queries (those from ``first_scored`` on) of every sequence.
    """
    num_tokens = weights.shape[-1]
    queries = range(first_scored, num_tokens)
    rows = []
    for k in range(num_tokens):
        at_k = [weights[:, :, q, q - k] for q in queries if q - k >= 0]
        rows.append(torch.stack(at_k).mean(dim=(0, 1)))  # (num_heads,)
    return torch.stack(rows, dim=1)  # (num_heads, T)


def read_heads(model, tokens=None):
    """For each head: the offset it attends to most, and its mean weight.

    A list of ``(offset, weight)``, one per head, over the evaluation set.
    """
    by_offset = _weight_by_offset(model, tokens)  # (num_heads, T)
    best = by_offset.argmax(dim=1)  # (num_heads,)
    return [(int(k), float(by_offset[h, k])) for h, k in enumerate(best)]


def read_pairs(model, tokens=None):
    """For each head: the two offsets it attends to most, and their weight.

    A list of ``((offset, offset), weight)``, one per head, the offsets in
    increasing order and ``weight`` the mean weight the two get together,
    over the evaluation set. A head that serves two offsets puts almost all
    its weight on them.
    """
    by_offset = _weight_by_offset(model, tokens)  # (num_heads, T)
    top = by_offset.topk(2, dim=1)
    return [
        (tuple(sorted(int(k) for k in offsets)), float(weights.sum()))
        for offsets, weights in zip(top.indices, top.values, strict=True)
    ]


def _weight_by_offset(model, tokens):
    tokens = model.task.eval_set() if tokens is None else tokens
    weights = model.attention_weights(tokens)  # (b, h, T, T)
    return weight_by_offset(weights, model.task.first_scored)


def parameter_count(model):
    """How many numbers training adjusts."""
    return sum(p.numel() for p in model.parameters())


#: Bands for printing an accuracy. A model that has not learned the task
#: lands somewhere different after a last-bit change in training (another
#: CPU, another math library); a band far from its edges does not move.
ACCURACY_BANDS = ((0.99, "99 % or more"), (0.95, "95 to 99 %"), (0.70, "70 to 95 %"))
#: A head that puts more than this on one offset is focused on it.
FOCUSED = 0.9
#: A head that puts less than this on every offset is spread.
SPREAD = 0.6
#: A head that puts more than this on two offsets together serves those two.
PAIRED = 0.8


def accuracy_band(accuracy):
    """``accuracy`` (a share) as a band of percentages, for printing."""
    for low, text in ACCURACY_BANDS:
        if accuracy >= low:
            return text
    return f"under {ACCURACY_BANDS[-1][0] * 100:.0f} %"


def describe_head(offset, weight):
    """What ``read_heads`` found for one head, in words that survive
    last-bit changes: the offset for a focused head, "spread" otherwise.
    Short enough for a phone (at most 33 characters)."""
    if weight > FOCUSED:
        return f"looks {offset} back (weight > {FOCUSED})"
    if weight < SPREAD:
        return f"spread (< {SPREAD} on every offset)"
    return f"mostly {offset} back (weight {SPREAD}-{FOCUSED})"


def describe_pair(offsets, weight):
    """What ``read_pairs`` found for one head, in words that survive
    last-bit changes. Short enough for a phone (at most 33 characters)."""
    first, second = offsets
    if weight > PAIRED:
        return f"{first} and {second} back (weight > {PAIRED})"
    return f"spread (< {PAIRED} on any two offsets)"


def position_over_token(model):
    """Per head: how much more its queries read the position than the token.

    Head ``h``'s block of ``W_query`` turns each position embedding and each
    token embedding into a part of a query. The ratio of their mean lengths
    says which of the two the head's queries mostly come from: a head that
    attends by offset needs the position, not the token.
    """
    attn = model.attention
    with torch.no_grad():
        W = attn.W_query.weight.T  # (d_model, d_model), as x @ W uses it
        from_position = model.position_embedding.weight @ W  # (T, d_model)
        from_token = model.token_embedding.weight @ W  # (vocab, d_model)
        ratios = []
        for h in range(attn.num_heads):
            block = slice(h * attn.head_dim, (h + 1) * attn.head_dim)
            position = from_position[:, block].norm(dim=1).mean()
            token = from_token[:, block].norm(dim=1).mean()
            ratios.append(float(position / token))
    return ratios
