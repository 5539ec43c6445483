"""The frame every console page shares: style, title, who is signed in, no caching."""

from __future__ import annotations

from html import escape

from conveyor.server.http import Response

PREFIX = "/console"
REFRESH_S = 5
HTML = b"text/html; charset=utf-8"

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { padding: 0.3em 0.8em; border-bottom: 1px solid #ddd; text-align: left;
         white-space: nowrap; }
td code { white-space: pre-wrap; word-break: break-all; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
.muted { color: #888; }
code { background: #f4f4f4; padding: 0 0.2em; }
form.who { float: right; }
label { display: block; margin: 0.5em 0; }
"""

# Pages show message bodies: no cache keeps them past sign-out.
_NO_STORE = (b"cache-control", b"no-store")


def render(status: int, title: str, body: str, refresh: bool = False, who: str = "") -> Response:
    """A console page; `body` is HTML (escaped by the caller), `who` the signed-in key's
    sign-out form (console_auth.SignIn.who)."""
    meta = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if refresh else ""
    text = (f'<!doctype html><html><head><meta charset="utf-8">{meta}'
            f"<title>{escape(title)} · Conveyor</title><style>{_STYLE}</style></head>"
            f"<body>{who}<h1>{escape(title)}</h1>\n{body}\n</body></html>")
    return Response(status, text.encode(), HTML, [_NO_STORE])


def redirect(location: str, headers: list[tuple[bytes, bytes]] | None = None) -> Response:
    """303 See Other: the browser GETs `location` (after a form: never posts it again).
    `location` must be plain ASCII URL characters; callers pass checked paths only."""
    return Response(303, b"", HTML, [(b"location", location.encode("ascii")), _NO_STORE,
                                     *(headers or [])])
