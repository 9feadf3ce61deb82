"""Browser tests of the built book.

A package, so that its conftest does not shadow tests/conftest.py.
"""
