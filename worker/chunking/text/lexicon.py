"""Word lists and thresholds used by the rule-based strategies, kept in one place.

Everything here is data: the `lexical` ladder's phrase lists and limits, the stop words both
strategies ignore, and the technical vocabulary the `adaptive` density counts. The tables in
``docs/concepts/strategies.md`` (``lexical``) are written from this module; change both together.
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

# -- lexical: the block ladder ------------------------------------------------------------------

LEXICAL_MAX_CHARS: Final = 1500
"""``lexical``'s default cap in characters (its ``chunk_size`` when sizes are characters)."""

SHORT_PARAGRAPH_CHARS: Final = 120
"""A paragraph this short (or shorter) rarely stands alone: it joins its neighbour."""

KEYWORD_MIN_LETTERS: Final = 4
"""Keywords are words of at least this many letters that are not stop words."""

KEYWORD_OVERLAP_MIN: Final = 2
"""Distinct keywords a block must share with the chunk to join it by keyword_overlap."""

LIST_KEYWORD_OVERLAP_MIN: Final = 1
"""Distinct keywords a list must share with the chunk to join it by list_continuation."""

TRANSITION_PHRASES: Final = (
    "in conclusion", "to conclude", "in summary", "to summarize", "to sum up", "finally",
    "lastly", "next", "moving on", "turning to", "now let's", "let's now", "another",
    "on a different note", "meanwhile", "in the next section",
)  # fmt: skip
"""A block opening with one of these ends the current chunk and starts a new one."""

LADDER_PHRASES: Final = {
    "reference_continuity": (
        "this", "these", "that", "those", "it", "its", "they", "their", "such", "the above",
        "the former", "the latter", "here", "as mentioned", "as noted", "as shown", "as above",
    ),
    "elaboration": (
        "in other words", "specifically", "more specifically", "that is", "in particular",
        "particularly", "furthermore", "moreover", "additionally", "in addition", "also",
        "besides", "likewise", "similarly", "indeed", "namely", "more precisely",
    ),
    "example": (
        "for example", "for instance", "e.g.", "as an example", "example", "consider",
        "to illustrate", "such as", "suppose", "imagine",
    ),
    "cause_effect": (
        "therefore", "thus", "hence", "consequently", "as a result", "because", "since",
        "so", "accordingly", "this means", "which means", "due to", "for this reason",
    ),
    "contrast_continuation": (
        "however", "but", "although", "though", "yet", "still", "nevertheless",
        "nonetheless", "on the other hand", "in contrast", "conversely", "instead",
        "whereas", "even so", "despite", "unlike",
    ),
}  # fmt: skip
"""Prefix rules in ladder order. A block whose first words match (ASCII case-insensitive,
whole words) continues the chunk for that reason."""
