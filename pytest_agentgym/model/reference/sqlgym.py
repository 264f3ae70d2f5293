"""Reference policy for SQLGym: a pattern-based text-to-SQL for five question forms.

It reads only the observation: sqlgym's description of the database
("<db> contains tables such as a, b. Table a has columns such as x, y. ...")
and the question after the blank line. It never sees the gold SQL, and it
answers only the questions it can parse; the rest get a guess that is
usually wrong. The forms it understands (T a table's name, singular or
plural; C, C2 columns of T; V a number or a quoted text):

1. ``How many T are there?`` -> ``SELECT COUNT(*) FROM T``
2. ``How many T have a C of V?`` -> ``SELECT COUNT(*) FROM T WHERE C = V``
3. ``What is the average|highest|lowest|total C of|among|in the T?``
   -> ``SELECT AVG|MAX|MIN|SUM(C) FROM T``
4. ``What is the C of the T whose C2 is V?`` -> ``SELECT C FROM T WHERE C2 = V``
5. ``List the C of the|all T whose C2 is V.`` -> the same as 4

Names in the description are BIRD's natural names (``birth year``); the SQL
name is taken to be the natural name with spaces read as ``_``, which is how
the shipped data names them (docs/envs/sqlgym.md). On the shipped dev set these
forms cover 10 of the 30 questions (the simple ones); on real BIRD data, whose
natural names do not map back this way and whose questions are free text,
expect almost nothing.

Any other question gets ``SELECT COUNT(*) FROM T`` for the first table named
in it (else the first table), said to be a guess in the thought.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Sequence

from pytest_agentgym.model.reference.base import Message, react

_DESCRIPTION = re.compile(r"^(?P<db>\S+) contains tables such as (?P<tables>[^\n]*?)\.(?: |\n|$)")
_TABLE = re.compile(r"Table (?P<table>[^.]+?) has columns such as (?P<columns>[^.]*)\.")
_VALUE = r"(?P<v>.+?)"
FORMS = (
    ("count", re.compile(r"^How many (?P<t>.+?) are there\?$", re.I)),
    ("count_where", re.compile(rf"^How many (?P<t>.+?) (?:have|has) an? (?P<c2>.+?) of {_VALUE}\?$", re.I)),
    ("aggregate", re.compile(r"^What is the (?P<agg>average|highest|lowest|total) (?P<c>.+?) "
                             r"(?:of|among|in) (?:all )?(?:the )?(?P<t>.+?)\?$", re.I)),
    ("value", re.compile(rf"^What is the (?P<c>.+?) of the (?P<t>.+?) whose (?P<c2>.+?) is {_VALUE}\?$", re.I)),
    ("value", re.compile(rf"^List the (?P<c>.+?) of (?:all )?(?:the )?(?P<t>.+?) whose (?P<c2>.+?) is {_VALUE}\.$",
                         re.I)),
)
AGGREGATES = {"average": "AVG", "highest": "MAX", "lowest": "MIN", "total": "SUM"}


@dataclass(frozen=True)
class Schema:
    """Table natural name -> its column natural names, in the description's order."""

    tables: dict[str, tuple[str, ...]]

    def table(self, phrase: str) -> str | None:
        phrase = phrase.strip().lower()
        for name in self.tables:
            if phrase in (name, name.rstrip("s"), name + "s"):
                return name
        return None

    def column(self, table: str, phrase: str) -> str | None:
        phrase = phrase.strip().lower()
        return phrase if phrase in self.tables[table] else None


def sql_name(natural: str) -> str:
    """``birth year`` -> ``birth_year``; quoted when that is still not a plain identifier."""
    name = natural.replace(" ", "_")
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def sql_value(text: str) -> str:
    """A number as it is; quoted text (or any other text) as an SQL string."""
    text = text.strip()
    if re.fullmatch(r"-?\d+(?:\.\d+)?", text):
        return text
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return "'" + text.replace("'", "''") + "'"


def read_observation(text: str) -> tuple[Schema, str] | None:
    """(schema, question) from sqlgym's observation; None when ``text`` is not one."""
    found = _DESCRIPTION.match(text.strip())
    if found is None:
        return None
    tables = {m["table"].strip().lower(): tuple(c.strip().lower() for c in m["columns"].split(",") if c.strip())
              for m in _TABLE.finditer(text)}
    if not tables:
        return None
    question = text.strip().rsplit("\n\n", 1)[-1].strip()
    return Schema(tables), question


def answer(schema: Schema, question: str) -> tuple[str, str]:
    """(thought, SQL) for one question."""
    for form, pattern in FORMS:
        found = pattern.match(question)
        if found is None:
            continue
        sql = _sql_for(form, found.groupdict(), schema)
        if sql is not None:
            return f"The question has the form '{form}', which maps to one query.", sql
    table = _first_named_table(schema, question)
    return (f"I cannot parse this question; as a guess I count the rows of {table}.",
            f"SELECT COUNT(*) FROM {sql_name(table)}")


def _sql_for(form: str, parts: dict[str, str | None], schema: Schema) -> str | None:
    table = schema.table(parts["t"] or "")
    if table is None:
        return None
    columns = {key: schema.column(table, parts[key] or "") for key in ("c", "c2") if parts.get(key)}
    if None in columns.values():
        return None
    where = f" WHERE {sql_name(columns['c2'])} = {sql_value(parts['v'] or '')}" if "c2" in columns else ""
    if form in ("count", "count_where"):
        return f"SELECT COUNT(*) FROM {sql_name(table)}{where}"
    if form == "aggregate":
        return f"SELECT {AGGREGATES[(parts['agg'] or '').lower()]}({sql_name(columns['c'])}) FROM {sql_name(table)}"
    return f"SELECT {sql_name(columns['c'])} FROM {sql_name(table)}{where}"


def _first_named_table(schema: Schema, question: str) -> str:
    words = re.findall(r"[a-z_]+", question.lower())
    for word in words:
        table = schema.table(word)
        if table is not None:
            return table
    return next(iter(schema.tables))


def _latest(messages: Sequence[Message]) -> tuple[Schema, str] | None:
    for message in reversed(messages):
        if message.get("role") == "user":
            found = read_observation(message.get("content") or "")
            if found is not None:
                return found
    return None


def _reply(thought: str, sql: str) -> str:
    return react(thought, f"```sql\n{sql}\n```")


class SQLGymPolicy:
    name = "SQLGym"

    def recognizes(self, messages: Sequence[Message]) -> bool:
        return _latest(messages) is not None

    def reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        schema, question = _latest(messages)  # type: ignore[misc]
        return _reply(*answer(schema, question))

    def random_reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        schema, _ = _latest(messages)  # type: ignore[misc]
        table = rng.choice(sorted(schema.tables))
        column = rng.choice(schema.tables[table])
        return _reply("A random column of a random table.", f"SELECT {sql_name(column)} FROM {sql_name(table)}")


POLICY = SQLGymPolicy()
