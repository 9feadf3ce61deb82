"""Chapter 9's check, on one table of answers: right steps written in other
ways are accepted; each catalogued mistake, the starting code and the book's
own functions are named."""

import pytest
import torch

import mha.checks.rotary as rotary
from mha.checks.rotary import MISTAKES, START
from mha.rotary_cache import rotary_step
from mha.rotary_exercise import my_rotary_step, rotary_step_practice


def turned(t, start, m, over=None, width=None, layout="half", swap=False, sign=1, base=None,
           low=False, flip=1, rate=lambda i, half: i, degrees=False, rest=None,
           inplace=False):  # fmt: skip
    """A reader's turn of t (..., T, n), written with a loop over pairs (``rate``: pair i's i)."""
    r = {"head": m.head_dim, "all": t.shape[-1]}.get(width, m.rotary_dim)
    over = {"head": m.head_dim, "d_out": m.d_out, "2r": 2 * r, "r/2": r / 2}.get(over, r)
    out = t.clone() if rest is None else torch.zeros_like(t)
    for i in range(r // 2):
        pairs = {"half": (i, i + r // 2), "head half": (i, i + m.head_dim // 2)}
        a, b = pairs.get(layout, (2 * i, 2 * i + 1))  # else interleaved
        rate_i = (base or m.base) ** (-2 * rate(i, r // 2) / over)
        for j in range(t.shape[-2]):
            angle = torch.tensor(sign * (start + j) * rate_i)
            angle = angle.bfloat16().float() if low else angle.deg2rad() if degrees else angle
            cos, sin = (angle.sin(), angle.cos()) if swap else (angle.cos(), angle.sin())
            x1, x2 = t[..., j, a], t[..., j, b]
            out[..., j, a] = x1 * cos - x2 * sin
            out[..., j, b] = x2 * cos + flip * (out[..., j, a] if inplace else x1) * sin
    return torch.cat([t[..., r:], out[..., :r]], -1) if rest == "first" else out


def step(at=0, before=False, values=False, turn=True, key=True, scale="head_dim", root=0.5, dim=-1,
         out=True, query=True, drop=None, cache_as=lambda c, k, v, raw: c.append(k, v), late=False,
         key_at=0, heads=False, again=False, row0=False, **how):  # fmt: skip
    """A reader's step, right or with one mistake, as a function to check (``cache_as``: the
    keys and values it attends to, from the cache, k and v and the key unturned, ``raw``)."""

    def answer(m, x, cache):
        position = at(cache, x) if callable(at) else 0 if at is None else cache.length + at
        q, k, v = m.W_query(x), m.W_key(x), m.W_value(x)  # (b, 1, d_out)
        if before:
            q, k = turned(q, position, m, **how), turned(k, position, m, **how)
        q, k, v = m.split_heads(q), m.split_heads(k), m.split_heads(v)
        raw, raw_query = k, q  # (b, H, 1, hd) each
        if heads:  # (b, 1, H, hd): the heads' axis turned as if it held tokens
            q, k = (turned(t.transpose(1, 2), position, m).transpose(1, 2) for t in (q, k))
        elif turn and not before:
            q = turned(q, position, m, **how) if query else q
            k = turned(k, position + key_at, m, **how) if key else k
            v = k if values == "key" else turned(v, position, m, **how) if values else v
        keys, vals = cache_as(cache, k, v, raw)
        keys = turned(keys, 0, m) if again else keys
        q = turned(raw_query, cache.length, m, **how) if late else q  # L + 1, after the append
        w = torch.einsum("bhqd,bhkd->bhqk", q, keys).div(getattr(m, scale, 1) ** root)
        p = m.dropout.p if drop is True else drop  # F.dropout trains unless told otherwise
        w = torch.nn.functional.dropout(w.softmax(dim), p) if drop else w.softmax(dim)
        context = (w @ vals).transpose(1, 2).flatten(2)  # (b, 1, d_out)
        y = m.out_proj(context) if out else context
        return y[:1].expand_as(y) if row0 else y

    return answer


def starting_code(m, x, cache):
    b = x.shape[0]
    q, k, v = (m.split_heads(p(x)) for p in (m.W_query, m.W_key, m.W_value))
    # turn the query and the key here
    keys, values = cache.append(k, v)
    w = torch.softmax(q @ keys.transpose(2, 3) / m.head_dim**0.5, dim=-1)
    return m.out_proj((w @ values).transpose(1, 2).reshape(b, 1, m.d_out))


# fmt: off
CASES = [
    (my_rotary_step, True, "equals RotaryAttention's forward"),
    (step(), True, "equals"),  # pair by pair, with a loop
    (starting_code, False, "Which vectors turn, at which position? hint(1)"),
    (step(turn=False), False, "Nothing turns"),
    (step(over="d_out"), False, "d_out, all heads' width"), (step(over="head"), False, "only r"),
    (step(width="head"), False, "first rotary_dim entries turn"),
    (step(layout="interleaved"), False, "other layout"), (step(swap=True), False, "swapped"),
    (step(values=True), False, "Values never turn"), (step(key=False), False, "the new key too"),
    (step(base=10_000.0), False, "use module.base"),
    (step(scale="no"), False, "not divided by √head_dim"),
    (step(scale="d_out"), False, "divided by √d_out"), (step(query=False), False, "Only the key"),
    (step(scale="rotary_dim"), False, "by √rotary_dim"), (step(low=True), False, "bfloat16"),
    (step(over="2r"), False, "the 2 of 2i left out"), (step(over="r/2"), False, "i counts pairs"),
    (step(drop=True), False, "Dropout ran in eval mode"), (step(drop=0.1), False, "eval mode"),
    (step(rate=lambda i, half: half - 1 - i), False, "run backwards"),
    (step(rate=lambda i, half: -i), False, "grow"), (step(rate=lambda i, h: i + 1), False, "i = 1"),
    (step(degrees=True), False, "read as degrees"), (step(rest="dropped"), False, "are lost"),
    (step(rest="first"), False, "rest comes first"), (step(inplace=True), False, "in place"),
    (step(key_at=1), False, "The key turns at L + 1"), (step(heads=True), False, "heads axis"),
    (step(at=lambda c, x: c.keys.shape[2]), False, "the cache's room"),
    (step(at=lambda c, x: x.shape[0]), False, "the batch"),
    (step(at=lambda c, x: x.shape[1]), False, "the one new token"),
    (step(again=True), False, "The cached keys turn again"),
    (step(cache_as=lambda c, k, v, _: [t[:, :, :1] for t in c.append(k, v)]), False, "key 0"),
    (step(cache_as=lambda c, k, v, _: [t[:, :, -1:] for t in c.append(k, v)]), False, "new key"),
    (step(cache_as=lambda c, k, v, _: [t[:, :, :-1] for t in c.append(k, v)]), False, "left out"),
    (step(values="key"), False, "the turned key"), (step(row0=True), False, "row 0's output"),
    (step(root=0.25), False, "match the reference's up to the scores over the L + 1 keys and "
     "first differ at the weights (scale, softmax): see hint(3)"),
    (step(cache_as=lambda c, k, v, _: (c.append(k, v), (c.keys, c.values))[1]), False, "empty sl"),
    (step(cache_as=lambda c, k, v, _: (torch.cat([c.keys[:, :, : c.length], k], 2),
                                       torch.cat([c.values[:, :, : c.length], v], 2))), False,
     "leaves the cache as it was"),
    (step(cache_as=lambda c, k, v, _: (c.append(k, v), c.append(k, v))[0]), False, "more than o"),
    (step(cache_as=lambda c, k, v, raw: (c.append(raw, v), (torch.cat([c.keys[:, :, : c.length -
     1], k], 2), c.values[:, :, : c.length]))[1]), False, "The cache holds the new key unturned"),
    (step(cache_as=lambda c, k, v, raw: (c.append(k * 2, v), (torch.cat([c.keys[:, :, : c.length -
     1], k], 2), c.values[:, :, : c.length]))[1]), False, "Your output is right, but the cache"),
    (lambda m, x, cache: step()(m, x, cache).double(), False, "returned torch.float64 numbers"),
    (step(dim=-2), False, "Softmax over dim=-2"), (step(root=1), False, "divided by head_dim"),
    (step(out=False), False, "No out_proj"), (step(sign=-1), False, "wrong way"),
    (step(at=None), False, "at position 0, which leaves a"),
    (step(at=1), False, "Position L + 1"), (step(at=-1), False, "Position L − 1"),
    (step(flip=-1), False, "a turn, not a reflection"), (step(late=True), False, "alike"),
    (step(layout="head half"), False, "not (i, i + head_dim / 2)"),
    (step(before=True), False, "before the head"), (step(before=True, width="all"), False, "split"),
    (rotary_step, False, "calls the book's turn"),  # the book's step, and its module's forward:
    (lambda m, x, cache: m(x, cache.length), False, "calls the book's turn"),  # no cache there
    (lambda m, x, cache: [][3], False, "IndexError: list index out of range"),
    ("not a function", False, "raised TypeError"),
]
# fmt: on


@pytest.mark.parametrize("answer, passes, words", CASES)
def test_the_check(answer, passes, words):
    result = rotary_step_practice.check(answer)
    assert result.passed == passes and words in str(result).replace("\n", " "), str(result)


def test_a_row_fails_on_a_check_without_its_entry(monkeypatch):
    """The table's rows can fail: without its entry, the unturned key is no longer named."""
    words = "turn the new key too"
    monkeypatch.setattr(rotary, "MISTAKES", tuple(m for m in MISTAKES if words not in m[1]))
    result = rotary_step_practice.check(step(key=False))
    assert not result.passed and words not in str(result), str(result)


def test_every_catalogued_mistake_has_a_row():
    told = [words for _, passes, words in CASES if not passes]
    for _, message in MISTAKES:
        message = START if message == "START" else message
        assert any(words in message.replace("\n", " ") for words in told), message
