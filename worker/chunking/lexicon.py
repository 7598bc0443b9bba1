"""Word lists and thresholds used by the rule-based strategies, kept in one place.

Everything here is data: the `lexical` ladder's phrase lists and limits, the stop words both
strategies ignore, and the technical vocabulary the `adaptive` density counts. The tables in
``docs/chunking.md`` are written from this module; change both together.
"""

from __future__ import annotations

from typing import Final

# -- stop words ---------------------------------------------------------------------------------

_STOP_WORDS_TEXT = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up upon very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves may might must shall one two new use used using get got make made like well
"""
STOP_WORDS: Final = frozenset(_STOP_WORDS_TEXT.split())
"""Function words: they say nothing about what a passage is about (lower case)."""

STOP_WORDS_ANY_CASE: Final = STOP_WORDS | {word.capitalize() for word in STOP_WORDS}
"""Stop words as they appear at the start of a sentence too ("The", "Once")."""

# -- adaptive: technical vocabulary -------------------------------------------------------------

TECH_WORDS: Final = frozenset(
    {
        # programming keywords, in the case code is written in
        "def", "class", "return", "import", "function", "const", "let", "var", "async",
        "await", "lambda", "yield", "struct", "enum", "impl", "fn", "func", "public",
        "private", "static", "void", "int", "bool", "float", "str", "null", "None", "nil",
        "true", "false", "True", "False", "elif", "else", "try", "except", "catch", "throw",
        "raise", "self", "this", "interface", "package", "println", "printf", "print",
        # SQL, only in the upper case that marks it as SQL ("from"/"where" are English)
        "SELECT", "FROM", "WHERE", "JOIN", "INSERT", "UPDATE", "DELETE", "CREATE", "TABLE",
        "GROUP", "ORDER", "VALUES", "INTO",
        # API, SDK, protocol and data-format terms
        "API", "APIs", "api", "SDK", "sdk", "HTTP", "HTTPS", "http", "https", "JSON", "json",
        "REST", "RESTful", "GraphQL", "gRPC", "URL", "URI", "XML", "YAML", "yaml", "CLI",
        "endpoint", "endpoints", "parameter", "parameters", "config", "schema", "runtime",
        "compiler", "database", "query", "pip", "npm", "install",
        # mathematics
        "algorithm", "algorithms", "theorem", "lemma", "proof", "corollary", "equation",
        "integral", "derivative", "matrix", "vector", "tensor", "polynomial", "logarithm",
        "complexity", "∑", "∫", "√",
    }
)  # fmt: skip
"""Whole words counted as technical hits, case as written."""

CODE_PUNCTUATION: Final = "{}<>[]()=;"
"""Each of these characters is one technical hit (O(n) counts through its parentheses)."""

ARABIC_COMPLEX_MIN_LETTERS: Final = 7
