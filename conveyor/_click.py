"""What the `conveyor` commands share on top of click: URL options checked where they are
given, and usage mistakes told in one line."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from conveyor.client import check_http_url


class OneLineError(click.ClickException):
    """A mistake in how a command was called, told in one line (no usage text), with
    click's usage-error exit status."""

    exit_code = 2


class HttpURL(click.ParamType):
    """An http(s) URL with a host and a valid port; a bad one is a one-line error naming
    the option (or the environment variable it came from)."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return check_http_url(value)
        except ValueError as exc:
            raise OneLineError(f"{_where(param, ctx)}: {exc}") from None


def _where(param: click.Parameter | None, ctx: click.Context | None) -> str:
    if param is None:
        return "URL"
    envvar = getattr(param, "envvar", None)
    if (ctx is not None and param.name is not None and isinstance(envvar, str)
            and ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT):
        return envvar
    return param.opts[0] if param.opts else param.human_readable_name


class Port(click.ParamType):
    """A TCP port, 1-65535; anything else is a one-line error."""

    name = "port"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        try:
            port = int(value)
        except (TypeError, ValueError):
            port = -1
        if not 1 <= port <= 65535:
            msg = f"{_where(param, ctx)}: {value!r} is not a port number (1-65535)"
            raise OneLineError(msg)
        return port


HTTP_URL = HttpURL()
PORT = Port()
