"""Strategies and their parameters in words, read from the registry: the listing under
``chunkstream chunk --help`` and the one-line message for a refused ``--param``.

Nothing here is written by hand per strategy: names, summaries, parameters, types, bounds and
defaults all come from :mod:`worker.chunking.registry` (each strategy's ``params_type`` msgspec
Struct and ``summary``; a size left unset by default is shown as what the strategy resolves it
to, its chunker's ``resolved`` parameters), so a new strategy or parameter shows up without
touching the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import msgspec.inspect as mi

from worker.chunking import registry
from worker.chunking.contract import Resolving


def describe_type(t: mi.Type) -> str:
    """A parameter's type as a user reads it: ``integer >= 1``, ``number 0..1``, ``text``."""
    if isinstance(t, mi.UnionType):
        kinds = [describe_type(member) for member in t.types if not isinstance(member, mi.NoneType)]
        return " or ".join(kinds)
    if isinstance(t, mi.BoolType):
        return "true or false"
    if isinstance(t, mi.IntType):
        return _bounded("integer", t.ge, t.gt, t.le, t.lt)
    if isinstance(t, mi.FloatType):
        # As floats: msgspec reports a bound as it last compiled it (0.0 or 0).
        bounds = (None if b is None else float(b) for b in (t.ge, t.gt, t.le, t.lt))
        return _bounded("number", *bounds)
    if isinstance(t, mi.StrType):
        return "text" if not t.min_length else "text (not empty)"
    if isinstance(t, mi.LiteralType):
        return "one of " + ", ".join(str(v) for v in t.values)
    return type(t).__name__.removesuffix("Type").lower()


def _bounded(kind: str, ge: Any, gt: Any, le: Any, lt: Any) -> str:
    if ge is not None and le is not None:
        return f"{kind} {ge}..{le}"
    low = f">= {ge}" if ge is not None else f"> {gt}" if gt is not None else ""
    high = f"<= {le}" if le is not None else f"< {lt}" if lt is not None else ""
    return " ".join(part for part in (kind, low, high) if part)


def _a(kind: str) -> str:
    """``kind`` after "must be": an integer, a number; text and choices take no article."""
    if kind.startswith("integer"):
        return "an " + kind
    if kind.startswith("number"):
        return "a " + kind
    return kind


def _default(field: mi.Field, effective: msgspec.Struct | None) -> str:
    """The default a user gets: the declared one, or for a size left unset the value the
    strategy resolves it to in the unit it sizes in (``effective``: a built chunker's
    ``resolved`` parameters)."""
    if field.required:
        return "required"
    value = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
    if value is None and effective is not None:
        value = getattr(effective, field.name, None)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _unit(context: registry.BuildContext) -> str:
    retrieval = context.retrieval
    if retrieval is None:
        return "characters (no retrieval model found), unless tokenizer says otherwise"
    window = "" if retrieval.window is None else f", window {retrieval.window}"
    return (
        f"tokens of the retrieval model in {retrieval.directory}{window}, unless tokenizer "
        "says otherwise (tokenizer=character: characters, other defaults)"
    )


def _effective(name: str, context: registry.BuildContext) -> msgspec.Struct | None:
    """``name``'s parameters as built with no parameters, sized by the context's retrieval
    model (the boundary model changes no default)."""
    try:
        built = registry.build(name, {}, registry.BuildContext(retrieval=context.retrieval))
    except registry.StrategyError:
        return None
    chunker = built.chunker
    return chunker.resolved if isinstance(chunker, Resolving) else None


def strategies_help(context: registry.BuildContext | None = None) -> str:
    """Every registered strategy: name, whether it needs a model, summary, and each parameter
    with its type and effective default, sizes in the unit of ``context``'s retrieval model
    as ``chunkstream chunk`` resolves it (the epilog of ``chunkstream chunk --help``)."""
    context = context or registry.BuildContext()
    lines = [
        "strategies (--strategy NAME; parameters: --param NAME=VALUE, repeatable;",
        f"  sizes in {_unit(context)}):",
    ]
    for name in registry.names():
        strategy = registry.get(name)
        model = " (needs the embedding model)" if strategy.needs_model else ""
        lines.append(f"  {name}{model}")
        lines.append(f"      {strategy.summary}")
        info = mi.type_info(strategy.params_type)
        assert isinstance(info, mi.StructType)  # a params_type is a msgspec Struct
        fields = info.fields
        if not fields:
            lines.append("      (no parameters)")
        width = max((len(f.name) for f in fields), default=0)
        effective = _effective(name, context)
        for field in fields:
            lines.append(
                f"      {field.name:<{width}}  {describe_type(field.type)}; "
                f"default {_default(field, effective)}"
            )
    return "\n".join(lines)


def parse_strategy_params(strategy: registry.Strategy[Any], params: Mapping[str, str]) -> None:
    """Check ``params`` against ``strategy`` before any model or file is touched; a refusal is
    :class:`~worker.chunking.registry.InvalidParameters` naming the parameter and what it must
    be (``--param`` values arrive as text, so msgspec's own "got `str`" would mislead)."""
    try:
        strategy.parse_params(params)
    except registry.InvalidParameters as exc:
        raise registry.InvalidParameters(explain(strategy, params) or str(exc)) from None


def explain(strategy: registry.Strategy[Any], params: Mapping[str, str]) -> str | None:
    """The first parameter of ``params`` that ``strategy`` refuses on its own, in words; None
    when each is acceptable alone (a rule between two parameters: the strategy's message)."""
    fields = {f.name: f for f in msgspec.structs.fields(strategy.params_type)}
    for key, value in params.items():
        field = fields.get(key)
        if field is None:
            known = f"its parameters: {', '.join(fields)}" if fields else "it takes none"
            return f"strategy {strategy.name!r} has no parameter {key!r} ({known})"
        try:
            msgspec.convert(value, field.type, strict=False)
        except msgspec.ValidationError:
            kind = describe_type(mi.type_info(field.type))
            return f"strategy {strategy.name!r}: parameter {key} must be {_a(kind)}, got {value!r}"
    return None
