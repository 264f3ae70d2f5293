"""``pytest-agentgym view``: a local web server over a reports directory.

    from pytest_agentgym.report.view import ViewServer
    server = ViewServer("reports", host="127.0.0.1", port=8765)
    server.serve_forever()

What it serves (GET only, nothing is written under the reports directory):

    /                          the runs index (:mod:`~pytest_agentgym.report.index`), live
    /api/index                 {"token", "running", "rows", "table"}: the index again, for refreshing
    /runs/<key>/               a run's report, rendered from its directory on request
                               (:func:`~pytest_agentgym.report.render.render_run_dir`), so a
                               running run's page is current; it reloads when the run changes
    /api/runs/<key>/state      {"status", "episodes", "bytes", "token"}: what that page polls
    /compare?base=K&candidate=K[&metric=reward][&allow_mismatch=1]
                               the compare view of ``pytest-agentgym compare --html``
    /trend?run=K&run=K...[&metric=reward][&allow_mismatch=1]
                               the trend page of ``pytest-agentgym trend --html``
    /favicon.ico               the pages' icon (they link it as a data: URI; this is for other askers)

A ``<key>`` is a run directory's path under the reports directory as the index
lists it (``step-1200``, ``step-1200/shard-1-of-3``). Keys are looked up among the
directories the index found, never joined onto a path, so no URL reaches a file
outside a run directory under the reports directory (``..``, absolute paths and
symbolic links included). A run directory holding a symbolic link that leads out of
the reports directory (an episodes.jsonl, a report.html, a folder) is not read at all:
the index lists it as broken, saying which link, and its pages are refused (403).

Nothing is written under the reports directory: the light indexes that reading a run
leaves (results/light_index.py) go to a cache of the server's
(``$XDG_CACHE_HOME/pytest-agentgym/light-index``, or its temporary directory).

Only requests whose ``Host`` is a name the server answers are served
(transport/host_guard.py: loopback names, the bound address, ``--allow-host``); any other
gets 403 in plain text, so a page whose name rebinds to 127.0.0.1 reads nothing.

Pages are rendered into a temporary directory of the server's own and the last
:data:`KEEP_PAGES` are kept in memory while their runs' files stay the same; one page
is rendered at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import warnings
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, unquote, urlsplit

from markupsafe import escape

from pytest_agentgym.report.index import find_runs, index_parts, read_index, table_html
from pytest_agentgym.report.run_rows import BROKEN, RowCache, RunRow
from pytest_agentgym.results import light_index
from pytest_agentgym.results.store import EPISODES_FILE
from pytest_agentgym.transport.host_guard import HostGuard

#: How often a running run's page asks whether the run changed.
POLL_MS = 1500
#: Pages kept rendered (a 10,000-episode report is tens of MB).
KEEP_PAGES = 8


class NotFound(Exception):
    """A URL that names nothing served here; the message says what was asked and what exists."""


class BadRequest(Exception):
    """A request the server understood but cannot answer as asked (a comparison refused)."""


class Refused(Exception):
    """A run whose directory leads out of the reports directory (a symbolic link)."""


def link_out(root: Path, run: Path) -> Path | None:
    """The first symbolic link in the run directory ``run`` (at any depth) whose target is
    not under ``root``, or None."""
    for folder, folders, files in os.walk(run):  # links to folders are listed, not entered
        for name in (*folders, *files):
            entry = Path(folder) / name
            if entry.is_symlink() and not entry.resolve().is_relative_to(root):
                return entry
    return None


class _ConfinedRows(RowCache):
    """The row cache of a view: a run with a link out of ``root`` is a broken row, unread."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def row(self, key: str, path: Path) -> RunRow:
        leads_out = link_out(self.root, path)
        if leads_out is None:
            return super().row(key, path)
        return RunRow(key=key, path=str(path), status=BROKEN, problem=_link_problem(self.root, leads_out))


def _link_problem(root: Path, link: Path) -> str:
    return (f"not read: {link} is a symbolic link to {link.resolve()}, outside {root}; view reads nothing "
            f"outside the reports directory (copy the file in instead of linking it)")


class ViewServer(ThreadingHTTPServer):
    """The HTTP server of ``pytest-agentgym view`` over the reports directory ``reports``.
    ``allow_hosts``: Host names answered besides loopback and ``host`` (``--allow-host``);
    ``index_cache``: where the light indexes of its runs go (default: light_index.default_cache())."""

    daemon_threads = True  # a page still being sent does not hold up Ctrl-C

    def __init__(self, reports: str | Path, *, host: str = "127.0.0.1", port: int = 8765,
                 allow_hosts: tuple[str, ...] | list[str] = (), index_cache: Path | None = None) -> None:
        self.reports = Path(reports).resolve()
        self.host_guard = HostGuard(host, allow_hosts, option="--allow-host NAME")
        self.cache = _ConfinedRows(self.reports)
        self._lock = threading.Lock()          # one page rendered at a time (they read whole runs)
        self._rows_lock = threading.Lock()     # the row cache is not thread-safe
        self._pages: dict[str, tuple[str, bytes]] = {}  # what -> (the runs' state, the page)
        self._render_s: dict[str, float] = {}            # what -> how long its last rendering took
        self._scratch = Path(tempfile.mkdtemp(prefix="agentgym-view-"))
        self.index_cache = Path(index_cache) if index_cache is not None else light_index.default_cache()
        if self.index_cache.resolve().is_relative_to(self.reports):  # a cache inside what it must not write
            self.index_cache = self._scratch / "light-index"
        super().__init__((host, port), _Handler)
        light_index.keep_elsewhere(self.reports, self.index_cache)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else host
        return f"http://{host}:{port}/"

    def server_close(self) -> None:
        super().server_close()
        light_index.keep_beside(self.reports)
        shutil.rmtree(self._scratch, ignore_errors=True)

    # -- runs -------------------------------------------------------------------------

    def rows(self) -> list[RunRow]:
        with self._rows_lock:
            return read_index(self.reports, self.cache)

    def run_dir(self, key: str) -> Path:
        """The run directory the index lists under ``key``; :class:`NotFound` otherwise."""
        found = dict(find_runs(self.reports))
        if key not in found:
            raise NotFound(f"no run {key!r} under {self.reports}: the index lists "
                           f"{len(found)} run(s); pick one at /")
        leads_out = link_out(self.reports, found[key])
        if leads_out is not None:
            raise Refused(_link_problem(self.reports, leads_out))
        return found[key]

    def state(self, key: str) -> dict[str, Any]:
        path = self.run_dir(key)
        with self._rows_lock:
            row = self.cache.row(key, path)
            token = self.cache.signature(key, path) + "-" + row.status
        try:
            size = (path / EPISODES_FILE).stat().st_size
        except OSError:
            size = 0
        return {"key": key, "status": row.status, "episodes": row.episodes, "bytes": size, "token": token}

    # -- pages ------------------------------------------------------------------------

    def _cached(self, what: str, state: str, render: Callable[[Path], bytes]) -> bytes:
        """The page ``what`` for the runs' ``state``, rendered by ``render(scratch file)`` once."""
        with self._lock:
            kept = self._pages.get(what)
            if kept is not None and kept[0] == state:
                return kept[1]
            target = self._scratch / (hashlib.sha256(what.encode()).hexdigest()[:24] + ".html")
            began = time.monotonic()
            with warnings.catch_warnings():  # the page lists skipped lines itself
                warnings.simplefilter("ignore")
                page = render(target)
            self._render_s[what] = time.monotonic() - began
            target.unlink(missing_ok=True)
            self._pages.pop(what, None)
            self._pages[what] = (state, page)
            while len(self._pages) > KEEP_PAGES:  # the least recently made goes
                del self._pages[next(iter(self._pages))]
            return page

    def index_page(self) -> bytes:
        return "".join(index_parts(self.rows(), self.reports, live=True)).encode("utf-8", "backslashreplace")

    def index_data(self, known: str | None = None) -> dict[str, Any]:
        """The rows, and the table made of them unless the asker's ``known`` token says it has it."""
        rows = self.rows()
        data = [r.to_json() for r in rows]
        token = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode("utf-8", "backslashreplace")
                               ).hexdigest()[:16]
        answer = {"token": token, "running": sum(1 for r in rows if r.running), "rows": data}
        if token != known:
            answer["table"] = table_html(rows, live=True)
        return answer

    def report_page(self, key: str) -> bytes:
        from pytest_agentgym.report.render import render_run_dir

        path, state = self.run_dir(key), self.state(key)

        def render(target: Path) -> bytes:
            render_run_dir(path, output=target)
            return target.read_bytes()

        page = self._cached(f"run:{key}", state["token"], render)
        # a big run's page takes seconds to render: it is not reloaded more often than a third of the time
        every_ms = max(POLL_MS, int(3000 * self._render_s.get(f"run:{key}", 0.0)))
        return _with_badge(page, {"state": f"/api/runs/{_quote(key)}/state", "token": state["token"],
                                  "status": state["status"], "episodes": state["episodes"], "every_ms": every_ms})

    def compare_page(self, query: dict[str, list[str]]) -> bytes:
        from pytest_agentgym.compare import CompareError, compare_runs
        from pytest_agentgym.report.compare_view import write_compare_html

        base, candidate = _one(query, "base"), _one(query, "candidate")
        paths = [self.run_dir(base), self.run_dir(candidate)]
        options = _judging(query)
        state = "|".join(self.state(k)["token"] for k in (base, candidate)) + json.dumps(options, sort_keys=True)

        def render(target: Path) -> bytes:
            try:
                comparison = compare_runs(paths[0], paths[1], **options)
            except CompareError as exc:
                raise BadRequest(str(exc)) from None
            return write_compare_html(comparison, target).read_bytes()

        return _with_badge(self._cached(f"compare:{base}:{candidate}", state, render),
                           {"label": f"compare: {candidate} against {base}"})

    def trend_page(self, query: dict[str, list[str]]) -> bytes:
        from pytest_agentgym.compare import CompareError
        from pytest_agentgym.report.trend import build_trend
        from pytest_agentgym.report.trend_page import write_trend_html

        keys = query.get("run", [])
        if len(keys) < 2:
            raise BadRequest(f"a trend needs two runs or more (run=KEY for each), got {len(keys)}; pick them at /")
        paths = [self.run_dir(key) for key in keys]
        options = _judging(query)
        state = "|".join(self.state(k)["token"] for k in keys) + json.dumps(options, sort_keys=True)

        def render(target: Path) -> bytes:
            try:
                trend = build_trend(paths, **options)
            except CompareError as exc:
                raise BadRequest(str(exc)) from None
            return write_trend_html(trend, target).read_bytes()

        return _with_badge(self._cached("trend:" + "\n".join(keys), state, render),
                           {"label": f"trend of {len(keys)} runs"})


def _with_badge(page: bytes, live: dict[str, Any]) -> bytes:
    """``page`` with index_live.js before its end: a badge linking back to the index, and for a
    run's page (``live["state"]``) the polling that reloads it when the run changes."""
    from pytest_agentgym.report.page import asset, script_json

    addition = (f'<style>{asset("index.css")}</style>\n<script>window.AGENTGYM_LIVE = {script_json(live)};'
                f'</script>\n<script>{asset("index_live.js")}</script>\n').encode("utf-8")
    end = page.rfind(b"</body>")
    return page[:end] + addition + page[end:] if end >= 0 else page + addition


def _quote(key: str) -> str:
    from urllib.parse import quote

    return quote(key, safe="/")


def _one(query: dict[str, list[str]], name: str) -> str:
    values = query.get(name, [])
    if len(values) != 1 or not values[0]:
        raise BadRequest(f"give exactly one {name}=KEY (a run as the index lists it), got {len(values)}")
    return values[0]


def _judging(query: dict[str, list[str]]) -> dict[str, Any]:
    """The comparison's options from the query; the defaults of ``pytest-agentgym compare``."""
    metric = (query.get("metric") or ["success"])[0]
    if metric not in ("success", "reward"):
        raise BadRequest(f"metric={metric!r}: give metric=success or metric=reward")
    return {"metric": metric, "allow_mismatch": (query.get("allow_mismatch") or ["0"])[0] in ("1", "yes", "true")}


def _problem_page(status: HTTPStatus, message: str, retry: str | None = None) -> bytes:
    from pytest_agentgym.report.page import FAVICON_HREF

    more = (f'<p><a href="{escape(retry)}">Compare them anyway</a> (the settings that differ are listed on '
            f'the page).</p>') if retry else ""
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" "
            f"href=\"{FAVICON_HREF}\"><title>{status.value} {escape(status.phrase)} · pytest-agentgym view</title>"
            f"</head><body style=\"font: 14px system-ui; margin: 24px\"><h1>{status.value} {escape(status.phrase)}</h1>"
            f"<p id=\"problem\" style=\"white-space: pre-wrap\">{escape(message)}</p>{more}"
            f"<p><a href=\"/\">All runs</a></p></body></html>").encode("utf-8")


class _Handler(BaseHTTPRequestHandler):
    server: ViewServer
    server_version = "pytest-agentgym-view"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # quiet: the terminal keeps the one line that says where the server is

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        host = self.headers.get("Host")
        if not self.server.host_guard.allows(host):
            self._send(self.server.host_guard.refusal(host).encode("utf-8"), HTTPStatus.FORBIDDEN,
                       "text/plain; charset=utf-8")
            return
        parts = urlsplit(self.path)
        path, query = unquote(parts.path), parse_qs(parts.query)
        try:
            if path in ("/", "/index.html"):
                self._send(self.server.index_page())
            elif path == "/api/index":
                self._json(self.server.index_data((query.get("token") or [None])[0]))
            elif path.startswith("/api/runs/") and path.endswith("/state"):
                self._json(self.server.state(path[len("/api/runs/"):-len("/state")]))
            elif path.startswith("/runs/"):
                key = path[len("/runs/"):]
                if not key.endswith("/"):
                    self._redirect(f"/runs/{_quote(key)}/")
                else:
                    self._send(self.server.report_page(key.rstrip("/")))
            elif path == "/compare":
                self._send(self.server.compare_page(query))
            elif path == "/trend":
                self._send(self.server.trend_page(query))
            elif path == "/favicon.ico":
                from pytest_agentgym.report.page import FAVICON_SVG

                self._send(FAVICON_SVG.encode("utf-8"), kind="image/svg+xml")
            else:
                raise NotFound(f"nothing is served at {path}; the runs are listed at /")
        except NotFound as exc:
            self._send(_problem_page(HTTPStatus.NOT_FOUND, str(exc)), HTTPStatus.NOT_FOUND)
        except Refused as exc:
            self._send(_problem_page(HTTPStatus.FORBIDDEN, str(exc)), HTTPStatus.FORBIDDEN)
        except BadRequest as exc:
            retry = None
            if path in ("/compare", "/trend") and "were not run the same way" in str(exc) \
                    and "allow_mismatch" not in query:
                retry = self.path + "&allow_mismatch=1"
            self._send(_problem_page(HTTPStatus.BAD_REQUEST, str(exc), retry), HTTPStatus.BAD_REQUEST)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser went away
        except Exception as exc:  # noqa: BLE001 - one page failing must not stop the server
            self._send(_problem_page(HTTPStatus.INTERNAL_SERVER_ERROR,
                                     f"{type(exc).__name__}: {exc} (this page could not be made; the run's "
                                     f"files are as they were)"), HTTPStatus.INTERNAL_SERVER_ERROR)

    def _send(self, body: bytes, status: HTTPStatus = HTTPStatus.OK, kind: str = "text/html; charset=utf-8") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _json(self, data: Any) -> None:
        self._send(json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8", "backslashreplace"),
                   kind="application/json; charset=utf-8")

    def _redirect(self, location: str) -> None:
        self.send_response(HTTPStatus.MOVED_PERMANENTLY)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()
