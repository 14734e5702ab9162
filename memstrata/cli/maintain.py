"""``memstrata worker`` (background jobs as a process) and ``memstrata maintain``."""

from __future__ import annotations

import signal
import threading

import click

from .main_helpers import handle_errors

__all__ = ["worker", "maintain"]

_STORE = "Storage URL (default: $MEMSTRATA_STORE or sqlite:///memstrata.db)."
_EMBEDDER = "Embedding provider (default: $MEMSTRATA_EMBEDDER or local:e5-small)."


def _open(store: str | None, embedder: str | None, **settings):
    from ..memory import Memory

    # this process is the worker: no second one inside Memory
    return Memory(store, embedder=embedder, worker="off", **settings)


@click.command()
@click.option("--store", default=None, help=_STORE)
@click.option("--embedder", default=None, help=_EMBEDDER)
@click.option("--until-idle", is_flag=True,
              help="Exit once no job is pending or running (default: run until stopped).")
@click.option("--lease", "lease_s", type=float, default=None,
              help="Seconds a claimed job stays claimed (default: the job_lease_s setting).")
@click.option("--poll", "poll_s", type=float, default=0.5, show_default=True,
              help="Seconds between polls when idle.")
@handle_errors
def worker(store, embedder, until_idle, lease_s, poll_s) -> None:
    """Run background jobs (extraction…) from the store until stopped (SIGTERM/Ctrl-C).

    Jobs are durable: a killed worker loses nothing, and the job it held is claimed
    again once its lease expires. Run as many workers as you like; jobs of one user
    run one at a time.
    """
    from ..stores import safe_url

    memory = _open(store, embedder, **({"job_lease_s": lease_s} if lease_s else {}))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    memory.worker.poll_s = poll_s
    click.echo(f"memstrata worker {memory.worker.name}: running the jobs of {safe_url(memory.store.url)} "
               f"{'until none is left' if until_idle else 'until stopped (SIGTERM or Ctrl-C)'}",
               err=True)
    try:
        ran = memory.worker.run(until_idle=until_idle, stop=stop)
    finally:
        memory.close()
    failed = len(memory.worker.failures)
    click.echo(f"worker {memory.worker.name}: {ran} job(s) run, {failed} failed attempt(s)")


@click.command()
@click.option("--store", default=None, help=_STORE)
@click.option("--embedder", default=None, help=_EMBEDDER)
@click.option("--user", "user_id", default=None, help="One user (default: every user).")
@click.option("--agent", "agent_id", default=None, help="Agent/app namespace.")
@click.option("--background", is_flag=True,
              help="Only enqueue maintain + profile jobs for `memstrata worker` to run.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def maintain(store, embedder, user_id, agent_id, background, as_json) -> None:
    """Decay stale and distrusted memories, enforce the per-user cap and
    refresh profile snapshots — here, or as background jobs with --background."""
    import json

    memory = _open(store, embedder)
    try:
        report = memory.maintain(user_id, agent_id=agent_id, background=background)
    finally:
        memory.close()
    if as_json:
        click.echo(json.dumps(report.to_dict()))
    elif background:
        click.echo(f"{report.users} user(s): {len(report.queued)} job(s) queued")
    else:
        click.echo(f"{report.users} user(s): {report.deactivated} deactivated, "
                   f"{report.reweighted} reweighted, {report.evicted} evicted")
