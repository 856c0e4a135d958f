"""The console's HTTP side: aiohttp's server on `[web] listen`, sign-in by a one-time link, the
session cookie, the CSRF check of every POST, and the rate limit of failed sign-ins.

Nothing is served without a session but the sign-in page (and its stylesheet and script): any
other address answers with the sign-in page, status 401. A link (`/signin?t=…`, from /console
or `relaybot console-link`) shows a button; only pressing it (a POST) uses the link, so a chat
app's link preview cannot spend it. The session is a random token in an HttpOnly,
SameSite=Strict cookie (Secure when `[web] public_url` is https), stored hashed in the store,
so any instance accepts it. Every change is a POST carrying the session's CSRF token; a stale
or missing one is refused (403) and changes nothing. Failed sign-ins are limited per client
address and overall.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.resources import files
from typing import TYPE_CHECKING

from aiohttp import web

from bot._mcp_oauth import CALLBACK_PATH
from bot.web import _mcp_signin
from bot.web._html import Html, e, form, page, tag
from engine.store import CONSOLE_CLI, ConsoleSession

if TYPE_CHECKING:
    from bot._daemon import Daemon

log = logging.getLogger("bot.web")

COOKIE = "relaybot_console"
_FAILS = 5  # failed sign-ins per address per window
_FAILS_ALL = 50  # from every address together
_WINDOW_S = 600.0
_LINK = re.compile(r"[A-Za-z0-9_-]{43}")  # a link's token (secrets.token_urlsafe(32))
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


@dataclass(frozen=True, slots=True)
class Ctx:
    """One signed-in request: what a page handler is given."""

    request: web.Request
    session: ConsoleSession
    daemon: Daemon

    @property
    def csrf(self) -> str:
        return self.session.csrf

    @property
    def is_owner(self) -> bool:
        """Signed in from an owner's chat (/console), not by `relaybot console-link`: the
        session names a person ("telegram:123") who can answer as an owner."""
        return ":" in self.session.admin

    @property
    def sees_text(self) -> bool:
        """Message text is shown to admins only (a viewer's link leaves it out)."""
        return self.session.role == "admin"

    def page(self, title: str, body: object) -> web.Response:
        html = page(title, body, csrf=self.csrf, who=self.session.admin, path=self.request.path)
        return respond(html)

    def form(self, action: str, button: str, **kw: object) -> Html:
        return form(action, self.csrf, button, **kw)  # type: ignore[arg-type]


Handler = Callable[[Ctx], Awaitable[web.Response]]


def respond(html: str, status: int = 200) -> web.Response:
    return web.Response(text=html, status=status, content_type="text/html", headers=_HEADERS)


class Limiter:
    """Failed sign-ins in the last `_WINDOW_S`, per address and overall. Past either count a
    sign-in is refused without using its link, unless the link would sign in (one an owner was
    given: a look-up that changes nothing), so that nobody can lock the owners out by failing
    from many addresses, or from the owner's own (a shared proxy, say)."""

    def __init__(self) -> None:
        self._fails: dict[str, list[float]] = {}

    def blocked(self, address: str) -> bool:
        now = time.monotonic()
        for key in list(self._fails):
            self._fails[key] = [t for t in self._fails[key] if now - t < _WINDOW_S]
            if not self._fails[key]:
                del self._fails[key]
        total = sum(len(v) for v in self._fails.values())
        return len(self._fails.get(address, ())) >= _FAILS or total >= _FAILS_ALL

    def failed(self, address: str) -> None:
        self._fails.setdefault(address, []).append(time.monotonic())


def _signin_page(token: str = "", note: str = "", status: int = 401) -> web.Response:
    if token:
        body = tag(
            "form",
            tag("input", type="hidden", name="t", value=token),
            tag("p", "This link signs you in once. Press the button to sign in."),
            tag("button", "Sign in", type="submit"),
            method="post",
            action="/signin",
        )
    else:
        body = tag(
            "p",
            "Send ",
            tag("code", "/console"),
            " to the bot in a private chat (owners only), or run ",
            tag("code", "relaybot console-link"),
            " on the server, and open the link you get.",
        )
    shown = tag("p", note, role="alert", class_="note") if note else ""
    return respond(page("Sign in", Html(e(shown) + e(body))), status)


class Server:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.limiter = Limiter()
        static = files("bot.web") / "static"
        self.static = {
            "console.css": ((static / "console.css").read_bytes(), "text/css"),
            "console.js": ((static / "console.js").read_bytes(), "text/javascript"),
        }

    @property
    def secure(self) -> bool:
        """The cookie is Secure: `[web] public_url` in force is https."""
        return (self.daemon.config.web.public_url or "").startswith("https://")

    @property
    def session_s(self) -> float:
        return self.daemon.config.web.session_hours * 3600

    def application(self, pages: dict[tuple[str, str], Handler]) -> web.Application:
        app = web.Application(client_max_size=64 * 1024)
        app.router.add_get("/signin", self.signin_form)
        app.router.add_post("/signin", self.signin)
        app.router.add_get("/static/{name}", self.asset)
        app.router.add_get(CALLBACK_PATH, self.mcp_signin)  # an MCP server's OAuth callback
        app.router.add_post("/signout", self.guard(self.signout))
        for (method, path), handler in pages.items():
            app.router.add_route(method, path, self.guard(handler))
        app.router.add_route("*", "/{tail:.*}", self.nothing)
        return app

    async def asset(self, request: web.Request) -> web.Response:
        found = self.static.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound()
        body, kind = found
        return web.Response(body=body, content_type=kind, headers={"Cache-Control": "max-age=3600"})

    async def mcp_signin(self, request: web.Request) -> web.Response:
        address = request.remote or "?"
        if self.limiter.blocked(address):
            text, status = "Too many failed attempts: wait ten minutes.", 429
        else:
            text, status = _mcp_signin.returned(self.daemon, request.query, address)
            if status != 200:
                self.limiter.failed(address)
        return respond(page("MCP sign-in", tag("p", text)), status)

    async def signin_form(self, request: web.Request) -> web.Response:
        return _signin_page(request.query.get("t", ""), status=200)

    async def signin(self, request: web.Request) -> web.Response:
        address = request.remote or "?"
        token = str((await request.post()).get("t", ""))
        console = self.daemon.store.console
        if self.limiter.blocked(address) and not await self._usable(token):
            log.warning("console: sign-in refused: too many failed attempts (%s)", address)
            return _signin_page(note="Too many failed attempts: wait ten minutes.", status=429)
        opened = await console.redeem(token, self.session_s) if token else None
        if opened is None:
            self.limiter.failed(address)
            log.warning("console: a sign-in link was refused (%s)", address)
            note = "This link is used, expired or wrong. Ask for a new one with /console."
            return _signin_page(note=note)
        cookie, session = opened
        if not self._owner(session.admin):  # removed from [access] admins since the link
            await console.end(cookie)
            log.warning("console: %s is not an owner any more: sign-in refused", session.admin)
            return _signin_page(note="This link's owner is no longer one of the bot's owners.")
        log.info("console: %s signed in", session.admin)
        response = web.HTTPSeeOther("/")
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=int(self.session_s),
            httponly=True,
            samesite="Strict",
            secure=self.secure,
            path="/",
        )
        raise response

    async def signout(self, ctx: Ctx) -> web.Response:
        await self.daemon.store.console.end(ctx.request.cookies.get(COOKIE, ""))
        log.info("console: %s signed out", ctx.session.admin)
        response = _signin_page(note="Signed out.", status=200)
        response.del_cookie(COOKIE, path="/")
        return response

    async def nothing(self, request: web.Request) -> web.Response:
        """Any other address: the sign-in page without a session, else "not found"."""
        if await self._session(request) is None:
            return _signin_page()
        return respond(page("Not found", tag("p", "There is no such page.")), 404)

    async def _session(self, request: web.Request) -> ConsoleSession | None:
        """The request's open session, if any; one whose owner was removed from `[access]
        admins` (by a reload, a restart, on another instance) is ended here and now."""
        token = request.cookies.get(COOKIE)
        session = await self.daemon.store.console.session(token) if token else None
        if session is None or self._owner(session.admin):
            return session
        await self.daemon.store.console.end(token or "")
        log.warning("console: %s is not an owner any more: their session ended", session.admin)
        return None

    async def _usable(self, token: str) -> bool:
        """Whether `token` is a link that would sign in now (cheaply refused when it cannot
        be one)."""
        return bool(_LINK.fullmatch(token)) and await self.daemon.store.console.usable(token)

    def _owner(self, admin: str) -> bool:
        """Whether `admin` may use the console now: an owner in the config in force, or the
        server's own shell (`relaybot console-link`)."""
        return admin == CONSOLE_CLI or admin in self.daemon.dispatcher.live.settings.admins

    def guard(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
        """`handler` for a signed-in request only; a POST must carry the session's token."""

        async def guarded(request: web.Request) -> web.Response:
            session = await self._session(request)
            if session is None:
                return _signin_page()
            if request.method == "POST":
                sent = str((await request.post()).get("csrf", ""))
                if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
                    log.warning("console: a form with a stale token was refused")
                    text = "This form is out of date: nothing was changed. Reload the page."
                    html = page(
                        "Refused",
                        tag("p", text, role="alert"),
                        csrf=session.csrf,
                        who=session.admin,
                    )
                    return respond(html, 403)
            return await handler(Ctx(request, session, self.daemon))

        return guarded
