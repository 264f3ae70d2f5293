"""The embedded WebShop server with its ``GET /embedded/data`` answered late, run as a
real process: what a run meets on a busy machine, where the shop's note about its data
comes back after the harness's first patience is spent.

    python tests/helpers/slow_data_webshop.py --delay 8 --host 127.0.0.1 --port 8123

Every other route is the real server's, answered at once.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path


def command(delay: float) -> str:
    """The node profile's ``command`` for this server (``{python}``, ``{host}``, ``{port}``
    are filled in by the harness)."""
    return f"{{python}} {Path(__file__).resolve()} --delay {delay:g} --host {{host}} --port {{port}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delay", type=float, required=True, help="seconds before /embedded/data answers")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()

    import uvicorn

    from pytest_agentgym.servers.embedded.webshop.server import create_app

    app = create_app()

    async def late_data(scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/embedded/data":
            await asyncio.sleep(args.delay)  # the fault under test: an answer that comes late
        await app(scope, receive, send)

    uvicorn.run(late_data, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
