"""The SQLGym data: BIRD's directory layout, and the small data set this project ships.

The ``sqlgym`` package (and AgentGym's ``agentenv-sqlgym``, protocol sheet §7)
reads a BIRD directory::

    <bird>/dev/dev.json                 questions: db_id, question, evidence, SQL, difficulty
    <bird>/dev/dev_tables.json          one schema per database (Spider/BIRD "tables" format)
    <bird>/dev/dev_databases/<db>/<db>.sqlite
    <bird>/train/train.json, train_tables.json, train_databases/...   (the same for train)

The shipped data is SQL text and questions in ``sqlgym_data/``: three invented
databases (``school_library`` and ``city_transit`` for dev, ``bakery`` for
train) and 40 questions with gold SQL (30 dev, 10 train; simple, moderate and
challenging). :func:`build_bird` turns it into that layout: it runs each
``.sql`` file into a fresh SQLite file and derives ``*_tables.json`` from the
databases themselves (table and column natural names are the SQL names with
``_`` read as a space, as BIRD writes them in lower case). :func:`shipped_bird_dir`
builds it once into a cache directory named after a hash of the sources.

    python -m pytest_agentgym.servers.embedded.sqlgym_bird DIR   # build the data into DIR
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

#: where the shipped sources are (package data)
SOURCE_PACKAGE = "pytest_agentgym.servers.embedded"
SOURCE_DIR = "sqlgym_data"
SPLITS = ("train", "dev")
#: environment variable that points the server at a BIRD directory (the original's name)
BIRD_PATH_ENV = "AGENTENV_SQLGYM_BIRD_PATH"


class BirdDataError(Exception):
    """A BIRD directory that cannot be used; the message names the path and the fix."""


def _sources() -> Path:
    return Path(str(resources.files(SOURCE_PACKAGE) / SOURCE_DIR))


def natural_name(sql_name: str) -> str:
    """How the shipped tables.json names a table or column: ``birth_year`` -> ``birth year``."""
    return sql_name.replace("_", " ").lower()


def schema_entry(db_id: str, conn: sqlite3.Connection) -> dict[str, Any]:
    """One database's entry of ``<split>_tables.json``, read from the database itself.

    ``column_names`` starts with ``[-1, "*"]``; a composite primary key is one nested
    list, as in BIRD; foreign keys are ``[column index, referenced column index]``."""
    tables = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
    columns: list[list[Any]] = [[-1, "*"]]
    types = ["text"]
    primary_keys: list[Any] = []
    index: dict[tuple[str, str], int] = {}
    for t, table in enumerate(tables):
        key = []
        for _cid, name, declared, _notnull, _default, pk in conn.execute(f'PRAGMA table_info("{table}")'):
            index[(table, name)] = len(columns)
            columns.append([t, name])
            types.append((declared or "text").lower())
            if pk:
                key.append((pk, index[(table, name)]))
        key_columns = [column for _, column in sorted(key)]
        if len(key_columns) == 1:
            primary_keys.append(key_columns[0])
        elif key_columns:
            primary_keys.append(key_columns)
    foreign_keys = []
    for table in tables:
        for row in conn.execute(f'PRAGMA foreign_key_list("{table}")'):
            _id, _seq, target, source_column, target_column = row[:5]
            foreign_keys.append([index[(table, source_column)], index[(target, target_column)]])
    return {
        "db_id": db_id,
        "table_names_original": tables,
        "table_names": [natural_name(t) for t in tables],
        "column_names_original": columns,
        "column_names": [[t, name if t < 0 else natural_name(name)] for t, name in columns],
        "column_types": types,
        "primary_keys": primary_keys,
        "foreign_keys": foreign_keys,
    }


def _question_record(split: str, number: int, item: dict[str, Any]) -> dict[str, Any]:
    """BIRD's fields: dev items carry question_id and difficulty, train items do not."""
    record = {"db_id": item["db_id"], "question": item["question"], "evidence": item["evidence"],
              "SQL": item["SQL"]}
    if split == "dev":
        record = {"question_id": number, **record, "difficulty": item["difficulty"]}
    return record


def build_bird(dest: str | Path) -> Path:
    """Build the shipped data set into ``dest`` (BIRD's layout) and return ``dest``.

    Every gold query is run once on its database: one that fails is an error
    here, not a reward of 0 in some later episode."""
    dest = Path(dest)
    sources = _sources()
    questions = json.loads((sources / "questions.json").read_text(encoding="utf-8"))
    for split in SPLITS:
        items = questions[split]
        split_dir = dest / split
        tables = []
        for db_id in dict.fromkeys(item["db_id"] for item in items):
            db_dir = split_dir / f"{split}_databases" / db_id
            db_dir.mkdir(parents=True, exist_ok=True)
            db_path = db_dir / f"{db_id}.sqlite"
            db_path.unlink(missing_ok=True)
            conn = sqlite3.connect(db_path)
            try:
                conn.executescript((sources / f"{db_id}.sql").read_text(encoding="utf-8"))
                conn.commit()
                tables.append(schema_entry(db_id, conn))
                for item in items:
                    if item["db_id"] == db_id:
                        _check_gold(conn, item)
            finally:
                conn.close()
        records = [_question_record(split, n, item) for n, item in enumerate(items)]
        (split_dir / f"{split}.json").write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
        (split_dir / f"{split}_tables.json").write_text(json.dumps(tables, indent=1) + "\n", encoding="utf-8")
    return dest


def _check_gold(conn: sqlite3.Connection, item: dict[str, Any]) -> None:
    try:
        rows = conn.execute(item["SQL"]).fetchall()
    except sqlite3.Error as exc:
        raise BirdDataError(f"gold SQL of {item['question']!r} fails on {item['db_id']}: {exc}") from exc
    if not rows:
        raise BirdDataError(f"gold SQL of {item['question']!r} returns no rows on {item['db_id']}: "
                            "any query with an empty result would be counted correct")


def sources_digest() -> str:
    """A hash of the shipped sources (and of this builder), naming the built copy."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for path in sorted(_sources().iterdir()):
        if path.suffix in (".sql", ".json"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-agentgym"


def shipped_bird_dir(cache_root: str | Path | None = None) -> Path:
    """The shipped data in BIRD's layout, built on first use under the cache directory
    (``$XDG_CACHE_HOME/pytest-agentgym``, else ``~/.cache/pytest-agentgym``; the system's
    temporary directory when that cannot be made).

    It is built in a temporary directory beside its final place and renamed, so a
    server that starts while another builds never sees half a data set."""
    root = Path(cache_root) if cache_root else _cache_root()
    target = root / f"sqlgym-bird-{sources_digest()}"
    if (target / "dev" / "dev.json").is_file():
        return target
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        if cache_root:
            raise
        return shipped_bird_dir(Path(tempfile.gettempdir()) / f"pytest-agentgym-{os.getuid()}")
    scratch = Path(tempfile.mkdtemp(prefix=".sqlgym-bird-", dir=root))
    try:
        build_bird(scratch)
        try:
            scratch.rename(target)
        except OSError:  # another process renamed its copy first: use that one
            if not (target / "dev" / "dev.json").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def split_sizes(bird_dir: str | Path) -> dict[str, int]:
    """How many questions each split of ``bird_dir`` has (splits that are absent: none)."""
    sizes = {}
    for split in SPLITS:
        path = Path(bird_dir) / split / f"{split}.json"
        if path.is_file():
            sizes[split] = len(json.loads(path.read_text(encoding="utf-8")))
    return sizes


def check_bird_dir(bird_dir: str | Path) -> dict[str, int]:
    """The split sizes of a user's BIRD directory, or :class:`BirdDataError` saying what
    is missing: at least one split needs its questions and tables files."""
    bird_dir = Path(bird_dir)
    if not bird_dir.is_dir():
        raise BirdDataError(f"{BIRD_PATH_ENV}={bird_dir} is not a directory; point it at the "
                            "directory that holds BIRD's train/ and dev/ (or unset it for the shipped data)")
    usable = {}
    for split, size in split_sizes(bird_dir).items():
        if (bird_dir / split / f"{split}_tables.json").is_file():
            usable[split] = size
    if not usable:
        raise BirdDataError(
            f"{bird_dir} has no BIRD split: expected dev/dev.json with dev/dev_tables.json and "
            "dev/dev_databases/<db>/<db>.sqlite (or the same under train/); "
            f"fix {BIRD_PATH_ENV} or unset it for the shipped data")
    return usable


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m pytest_agentgym.servers.embedded.sqlgym_bird DIR", file=sys.stderr)
        return 2
    dest = build_bird(args[0])
    print(f"built {', '.join(f'{s}: {n} questions' for s, n in split_sizes(dest).items())} in {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


#: the package the embedded SQLGym server runs on (the extra 'sqlgym' installs it)
REQUIRED_MODULE = "sqlgym"


def missing_requirements() -> str | None:
    """What to install for the embedded SQLGym server, or None when it can run here."""
    import importlib.util

    if importlib.util.find_spec(REQUIRED_MODULE) is None:
        return f"it needs the package {REQUIRED_MODULE!r}: pip install 'pytest-agentgym[sqlgym]'"
    return None
