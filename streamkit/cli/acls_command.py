"""``streamkit acls -A module:app``: the ACLs a worker of the app needs, as kafka-acls.sh lines."""
from __future__ import annotations

import logging
import sys

import click

from .acls import app_acls, kafka_acls_lines
from .common import Misuse, app_option, load_app, run


@click.command()
@app_option
@click.option("--principal", default=None,
              help="Who the worker authenticates as (default: User:<sasl_username>; mTLS: User:CN=...).")
@click.option("--command-config", default=None, help="Passed on to kafka-acls.sh (the admin's own client settings).")
def acls(app_spec: str, principal: str | None, command_config: str | None) -> None:
    """Print the Kafka ACLs a worker of the app needs, as kafka-acls.sh commands (no broker needed)."""
    logging.basicConfig(level="WARNING", stream=sys.stderr)
    app = load_app(app_spec)
    if principal is None:
        if not app.conf.sasl_username:
            raise Misuse("acls needs --principal (e.g. User:CN=worker for a client certificate), "
                         "or sasl_username in the app's settings")
        principal = f"User:{app.conf.sasl_username}"
    if ":" not in principal:
        raise Misuse(f"--principal {principal!r}: expected TYPE:NAME, e.g. User:{principal}")
    topology = run(app.plan_topology())
    for line in kafka_acls_lines(app_acls(app, topology), principal, app.conf.bootstrap_servers, command_config):
        click.echo(line)
