"""Reading a number typed as text: the first rule of the grammar :mod:`mha.predictions` reads.

- A number: ``4``, ``4.0``, ``-3``; digits grouped in threes by commas, spaces, underscores or
  apostrophes, ``8,388,608``, ``8 388 608``, ``8_388_608``; a product or a power of such numbers,
  ``4096 * 2048``, ``4096 × 2048``, ``2**23``, ``2^23``; optionally after a name and ``=``,
  ``d_out = 4``, and before up to three words that name its unit, ``136 blocks``, ``8 bytes
  per token``. A word that scales or hedges the number is not a unit: ``8 million``,
  ``128 MiB``, ``4 or so``, ``4 at most`` are unreadable.

The web page's text box reads numbers by the same rules: ``_static/guess.js`` holds the same
patterns, and ``tests/prediction_cases.json`` holds both readers to the same verdicts.
"""

import re

from .prediction_values import Unreadable, _tidy

#: One numeral: digits, grouped in threes or not, then maybe a decimal part.
_NUMERAL = r"(?:[0-9]{1,3}(?:[,_' \u00a0\u202f][0-9]{3})+|[0-9]+)(?:\.[0-9]*)?"
#: One factor of a number: a sign, a numeral, maybe a power ("**" is written "^" by then).
_FACTOR = re.compile(rf"([+-]?)({_NUMERAL})(?:\s*\^\s*({_NUMERAL}))?")
#: The largest number both readers hold exactly (a JavaScript number is a float64).
_LARGEST = 2**53
#: A number, then one to three words: its unit ("136 blocks", "8 bytes per token").
_UNIT = re.compile(r"(.*?[0-9])\s+([a-z][a-z'-]*(?:\s+[a-z][a-z'-]*){0,2})", re.I)
#: Words after a number that change or hedge it, so it is not what the reader states.
_NOT_A_UNIT = re.compile(
    r"(?:hundred|thousand|million|billion|trillion|dozen|lakh|crore|k|m|g|t|bn|mn|mil|"
    r"[kmgtp]i?b|(?:kilo|mega|giga|tera|peta|kibi|mebi|gibi|tebi)\w*|squared|cubed|percent|"
    r"or|and|nor|not|plus|minus|than|less|more|fewer|over|under|above|below|least|most|"
    r"at|max|min|about|around|roughly|approx\w*|circa|ish|so|nearly|almost|maybe|perhaps)s?",
    re.I,
)


def _numeral(text):
    """The value of a numeral of :data:`_NUMERAL`."""
    digits = re.sub(r"[,_' \u00a0\u202f]", "", text)
    return float(digits) if "." in digits else int(digits)


def _without_unit(text):
    """``text`` without the words naming its number's unit ("136 blocks": "136")."""
    found = _UNIT.fullmatch(text)
    if found is None or any(_NOT_A_UNIT.fullmatch(w) for w in found.group(2).split()):
        return text
    return found.group(1)


def _number_text(text):
    """The number ``text`` writes (the grammar's first rule), or :class:`Unreadable`."""
    said = re.sub(r"^[A-Za-z_][A-Za-z0-9_]*\s*=\s*", "", _tidy(text))
    said = _without_unit(said).replace("**", "^")
    value = 1
    for factor in re.split(r"\s*[*×]\s*", said):
        found = _FACTOR.fullmatch(factor)
        if found is None:
            raise Unreadable
        sign, base, power = found.groups()
        base = _numeral(base)
        if power is not None:
            power = _numeral(power)
            if power > 64 or power != int(power):
                raise Unreadable
            base = base ** int(power)
        value *= -base if sign == "-" else base
    if not abs(value) <= _LARGEST:
        raise Unreadable
    return value
