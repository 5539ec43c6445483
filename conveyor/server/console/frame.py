"""The frame every console page shares: header, title, who is signed in, assets, no caching.

The style and script are files of this package (static/), served from /console/static/:
no CDN, so the console works offline. A Content-Security-Policy lets pages load only
them: no inline script runs, even if something unescaped slipped into a page.
"""

from __future__ import annotations

from html import escape
from importlib import resources

from conveyor.server.http import Response

PREFIX = "/console"
STATIC = PREFIX + "/static/"
LIVE_EVERY_S = 3  # how often console.js reloads a page's live parts
HTML = b"text/html; charset=utf-8"
ASSETS = {"console.css": b"text/css; charset=utf-8",
          "console.js": b"text/javascript; charset=utf-8",
          "favicon.svg": b"image/svg+xml"}
FAVICON = STATIC + "favicon.svg"

# Pages show message bodies: no cache keeps them past sign-out.
_NO_STORE = (b"cache-control", b"no-store")
_CSP = (b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
_NO_SNIFF = (b"x-content-type-options", b"nosniff")


def render(status: int, title: str, body: str, refresh: bool = False, who: str = "",
           header: str = "") -> Response:
    """A console page; `body` is HTML (escaped by the caller), `who` the signed-in key's
    sign-out form (auth.SignIn.who), `header` the server's line (version, store, ...).
    `refresh`: console.js reloads the page's `data-live` parts every few seconds."""
    live = f' data-live-every="{LIVE_EVERY_S}"' if refresh else ""
    text = (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<meta name="color-scheme" content="light dark">'
            f"<title>{escape(title)} · Conveyor</title>"
            f'<link rel="icon" href="{FAVICON}" type="image/svg+xml">'
            f'<link rel="stylesheet" href="{STATIC}console.css">'
            f'<script src="{STATIC}console.js" defer></script></head>'
            f'<body{live}><header><a class="brand" href="{PREFIX}">Conveyor</a>'
            f'<span class="server">{header}</span>{who}</header>'
            f"<main><h1>{escape(title)}</h1>\n{body}\n</main></body></html>")
    return Response(status, text.encode(), HTML, [_NO_STORE, _CSP, _NO_SNIFF])


def redirect(location: str, headers: list[tuple[bytes, bytes]] | None = None) -> Response:
    """303 See Other: the browser GETs `location` (after a form: never posts it again).
    `location` must be plain ASCII URL characters; callers pass checked paths only."""
    return Response(303, b"", HTML, [(b"location", location.encode("ascii")), _NO_STORE,
                                     *(headers or [])])


def asset(name: str) -> Response | None:
    """A file of static/ by its name, or None for any other name."""
    content_type = ASSETS.get(name)
    if content_type is None:
        return None
    data = resources.files(__package__).joinpath("static", name).read_bytes()
    return Response(200, data, content_type, [(b"cache-control", b"max-age=300"), _NO_SNIFF])
