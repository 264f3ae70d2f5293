"""The HTML report: one self-contained page per run, rendered from its results.

    from pytest_agentgym.report.render import render_run_dir
    render_run_dir("reports/latest")          # writes reports/latest/report.html

Only imported when a report is rendered (it pulls in jinja2). See
:mod:`pytest_agentgym.report.render` for how the page is put together and
docs/report.md for what it shows.
"""
