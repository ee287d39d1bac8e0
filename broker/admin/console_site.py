"""The web console's static files, served by every broker's admin port at `/console/`.

The console is a single-page app built into a directory (`console_assets_dir`; '' : `console/dist`
of the source tree): `index.html` plus hashed files under `assets/`. It holds no data: everything
it shows comes from the admin REST API, called from the browser with the user's credentials. So
these routes need none (`Rule.PUBLIC` in `broker.admin.access`), and they are the only ones that
don't.

Routes (only with `console_enabled`):
- `GET /console` → 302 to `/console/`.
- `GET /console/` → `index.html` with `Cache-Control: no-cache` (a new build is seen at once);
  503 with a short HTML page saying how to build the console when `index.html` is missing.
- `GET /console/{path}` → the file at `path` under the directory: `assets/...` with a year-long
  immutable cache (their names carry a content hash), anything else `no-cache`. A path that is not
  a regular file inside the directory (`..`, a symlink out of it, a directory, a dot-file) is 404.
  Content types from the file's extension; unknown ones are `application/octet-stream`.
  A path without an extension that matches no file answers `index.html` (the app's own routes,
  `/console/topics/...`, survive a reload).

What must hold: nothing outside the assets directory is ever read (the resolved path must be
inside the resolved directory); a file larger than FILE_BYTES_MAX is not sent.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path, PurePosixPath

from aiohttp import web

from common.config import Config

INDEX = "index.html"
ASSETS_PREFIX = "assets/"
FILE_BYTES_MAX = 64 * 1024 * 1024     # larger than any built bundle; a bigger file is refused (404)
NO_CACHE = "no-cache"
IMMUTABLE = "public, max-age=31536000, immutable"
_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".html": "text/html",
          ".json": "application/json", ".map": "application/json", ".svg": "image/svg+xml", ".png": "image/png",
          ".ico": "image/x-icon", ".woff2": "font/woff2", ".woff": "font/woff", ".txt": "text/plain",
          ".webmanifest": "application/manifest+json"}
_TEXT_TYPES = ("text/", "application/json", "application/manifest+json", "image/svg+xml")
NOT_BUILT_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Strata console</title></head>
<body style="font-family: sans-serif; margin: 3em">
<h1>Strata console</h1>
<p>The console's assets are not built: run <code>make setup</code> (npm builds console/).</p>
<p>Looked for <code>{index}</code>; another directory can be set with <code>console_assets_dir</code>.</p>
</body></html>
"""


def assets_dir(config: Config) -> Path:
    """The directory the console is served from (`console_assets_dir`, else console/dist)."""
    if config.console_assets_dir:
        return Path(config.console_assets_dir)
    return Path(__file__).resolve().parents[2] / "console" / "dist"


def register(app: web.Application, config: Config) -> None:
    """The console's routes, when `console_enabled`."""
    if not config.console_enabled:
        return
    site = ConsoleSite(assets_dir(config))
    app.router.add_get("/console", site.redirect)
    app.router.add_get("/console/", site.index)
    app.router.add_get("/console/{path:.+}", site.file)


def content_type(name: str) -> str:
    """The Content-Type of a file named `name` (text types with charset=utf-8)."""
    suffix = PurePosixPath(name).suffix.lower()
    kind = _TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
    return kind + "; charset=utf-8" if kind.startswith(_TEXT_TYPES) else kind


def resolve_inside(root: Path, relative: str) -> Path | None:
    """The regular file `relative` names inside `root`, or None: no absolute paths, no `..`, no
    dot-files, nothing that resolves (through symlinks) outside `root`."""
    parts = PurePosixPath(relative).parts
    if not parts or relative.startswith("/") or "\\" in relative \
            or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        return None
    try:
        base = root.resolve(strict=True)
        target = base.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not target.is_relative_to(base) or not target.is_file():
        return None
    return target


class ConsoleSite:
    def __init__(self, root: Path) -> None:
        self.root = root            # the assets directory; it may not exist (yet): 503 then

    async def redirect(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/console/")

    async def index(self, request: web.Request) -> web.StreamResponse:
        found = resolve_inside(self.root, INDEX)
        if found is None:
            return web.Response(status=503, text=NOT_BUILT_HTML.format(index=self.root / INDEX),
                                content_type="text/html", headers={"Cache-Control": NO_CACHE})
        return _file_response(found, INDEX, NO_CACHE)

    async def file(self, request: web.Request) -> web.StreamResponse:
        relative = request.match_info["path"]
        found = resolve_inside(self.root, relative)
        if found is None:
            if "." not in PurePosixPath(relative).name and ".." not in relative:
                return await self.index(request)      # one of the app's own routes: the app answers it
            return web.Response(status=404, text="not found", content_type="text/plain",
                                headers={"Cache-Control": NO_CACHE})
        cache = IMMUTABLE if relative.startswith(ASSETS_PREFIX) else NO_CACHE
        return _file_response(found, relative, cache)


def _file_response(path: Path, name: str, cache: str) -> web.StreamResponse:
    """The file, sent by aiohttp off the event loop (sendfile), with our type and cache headers."""
    if path.stat().st_size > FILE_BYTES_MAX:
        return web.Response(status=404, text="not found", content_type="text/plain")
    return web.FileResponse(path, headers={"Content-Type": content_type(name), "Cache-Control": cache})
