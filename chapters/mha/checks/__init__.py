"""Self-checks for the book's exercises (AUTHORING.md), one module each; here, their results."""

from .core import CheckResult  # noqa: F401
