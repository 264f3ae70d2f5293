"""What every page of the report family shares: the jinja environment (templates in
``report/templates``, autoescaped, with the ``num``, ``pct``, ``duration``,
``describe`` and ``redact`` filters), the shipped CSS and JS inlined
(:func:`assets`), JSON that is safe inside a ``<script>`` block
(:func:`script_json`), the pages' icon (:data:`FAVICON_HREF`, a data: URI, so a page asks no
server for one) and writing a page to disk (:func:`write_page`).

Used by the run report (:mod:`~pytest_agentgym.report.render`), the compare view
(:mod:`~pytest_agentgym.report.compare_view`) and the trend page
(:mod:`~pytest_agentgym.report.trend_page`). Imports jinja2: only imported when a
page is rendered.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from pytest_agentgym.report.payload import escape_json_text
from pytest_agentgym.results.redact import redact_text

__all__ = ["FAVICON_HREF", "FAVICON_SVG", "TEMPLATES", "asset", "assets", "environment", "format_duration", "script_json", "write_page"]

#: Where the templates and the CSS and JS files they inline are shipped.
TEMPLATES = resources.files("pytest_agentgym.report") / "templates"

#: The pages' icon: a green square with a tick. Every page links it as :data:`FAVICON_HREF`
#: (the report stays one self-contained file); ``view`` also answers ``/favicon.ico`` with it.
FAVICON_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
               'fill="#1a7f37"/><path d="M4 8.5l2.5 2.5L12 5" fill="none" stroke="#fff" stroke-width="2"/></svg>')
FAVICON_HREF = "data:image/svg+xml," + quote(FAVICON_SVG, safe="/:=")


def environment() -> jinja2.Environment:
    """A jinja environment over the shipped templates, with the pages' filters."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_agentgym.report", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
    )
    env.filters["num"] = lambda v, fmt=".3f": "—" if v is None else format(v, fmt)
    env.filters["pct"] = lambda v: "—" if v is None else f"{v:.1%}"
    env.filters["duration"] = format_duration
    env.filters["describe"] = describe
    env.filters["redact"] = redact_text
    env.globals["favicon"] = FAVICON_HREF
    return env


def asset(name: str) -> Markup:
    """A CSS or JS file shipped with the templates, inlined as is (trusted text)."""
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():
        raise ValueError(f"{name} must not contain a closing </script> or </style> tag")
    return Markup(text)


def assets(*names: str) -> Markup:
    """Shipped CSS or JS files inlined one after another (see :func:`asset`)."""
    return Markup("\n".join(asset(name) for name in names))


def format_duration(seconds: float | None) -> str:
    """``42.0 s``, ``3 min 05 s``, ``1 h 02 min``; ``—`` for None (the ``duration`` filter)."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def describe(value: Any) -> str:
    """A value as a page shows it: text as it is, anything else as sorted JSON (the
    ``describe`` filter)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def script_json(data: Any) -> Markup:
    """JSON that is safe inside ``<script type="application/json">``.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e`` and ``\\u0026``
    (JSON.parse reads them back unchanged), so no string can close the tag or
    open a comment; U+2028/U+2029 are escaped for older JavaScript parsers.
    """
    return escape_json_text(json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False))


def write_page(parts: Iterable[str], target: Path) -> Path:
    """Write a page's pieces to ``target`` (through a temporary file, then renamed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    # half a surrogate pair is written as its escape, as jsonl.json_utf8 does (it can sit only in JSON strings
    # or in text that shows it); the page stays valid UTF-8
    with tmp.open("w", encoding="utf-8", errors="backslashreplace") as handle:
        handle.writelines(parts)  # streamed: a 10,000-episode page is never one string
    tmp.replace(target)
    return target
