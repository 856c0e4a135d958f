"""`relaybot doctor`'s checks of how updates reach this instance: Telegram's webhook (or long
polling) as getWebhookInfo reports it, and the Discord shard layout against the count Discord
recommends (``GET /gateway/bot``). Kept apart from bot/doctor.py, which calls them (both share
bot/_doctor_base.py); each asks the platform once and warns about what starts but will not
receive as meant."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from bot._doctor_base import Check, Status, get
from bot.config import Config
from channels import shard_layout
from tools.errors import RelaybotError

_NAME_TG = "telegram receiving"
_NAME_DC = "discord shards"


@dataclass(frozen=True, slots=True)
class WebhookInfo:
    """What getWebhookInfo says (the fields doctor shows)."""

    url: str
    pending: int
    last_error: str | None
    last_error_at: float | None  # unix time

    @classmethod
    def of(cls, result: dict[str, Any]) -> WebhookInfo:
        at = result.get("last_error_date")
        return cls(
            url=str(result.get("url") or ""),
            pending=int(result.get("pending_update_count") or 0),
            last_error=result.get("last_error_message"),
            last_error_at=float(at) if at else None,
        )

    def error_words(self) -> str:
        if self.last_error is None or self.last_error_at is None:
            return "no delivery error"
        ago = max(0, int(time.time() - self.last_error_at))
        return f"last delivery error {_ago(ago)}: {self.last_error}"


async def check_telegram_receiving(config: Config) -> Check:
    cfg = config.telegram
    try:
        cfg.resolve_webhook_secret()
    except RelaybotError as exc:
        return Check(
            _NAME_TG, Status.FAILED, str(exc), "export the variable webhook_secret_env names"
        )
    try:
        token = cfg.resolve_token()
        resp = await get(f"{cfg.api_base_url}{token}/getWebhookInfo")
    except (RelaybotError, httpx.HTTPError):
        return Check(_NAME_TG, Status.WARNING, "not checked: the Bot API did not answer (above)")
    if resp.status_code != 200:
        return Check(_NAME_TG, Status.WARNING, f"getWebhookInfo answered {resp.status_code}")
    info = WebhookInfo.of(resp.json()["result"])
    pending = f"{info.pending} update(s) pending"
    if cfg.mode == "polling":
        if info.url:
            return Check(
                _NAME_TG,
                Status.WARNING,
                f"a webhook is set ({info.url}; {pending}); `run` in polling mode deletes it",
                'set [telegram] mode = "webhook" to receive by webhook instead',
            )
        return Check(_NAME_TG, Status.OK, f"long polling; {pending}")
    host, port = cfg.listen_address()
    listen = f"relaybot listens on {host}:{port}"
    if not info.url:
        return Check(
            _NAME_TG, Status.OK, f"webhook not set yet (`run` sets it); {pending}; {listen}"
        )
    if info.url != cfg.webhook_url:
        return Check(
            _NAME_TG,
            Status.WARNING,
            f"the webhook is set to {info.url}, not webhook_url; `run` sets it to "
            f"{cfg.webhook_url}",
            "check that no other program uses this bot token",
        )
    detail = f"webhook {info.url}; {pending}; {info.error_words()}; {listen}"
    if info.pending and info.last_error:  # deliveries are failing now
        return Check(
            _NAME_TG,
            Status.WARNING,
            detail,
            f"Telegram cannot deliver: check that the proxy forwards {info.url} to {host}:{port}"
            " and that relaybot runs there",
        )
    return Check(_NAME_TG, Status.OK, detail)


async def check_discord_shards(config: Config) -> Check:
    cfg = config.discord
    try:
        token = cfg.resolve_token()
        resp = await get(f"{cfg.api_base_url}/gateway/bot", {"Authorization": f"Bot {token}"})
    except (RelaybotError, httpx.HTTPError):
        return Check(_NAME_DC, Status.WARNING, "not checked: Discord did not answer (above)")
    if resp.status_code != 200:
        return Check(_NAME_DC, Status.WARNING, f"GET /gateway/bot answered {resp.status_code}")
    recommended = int(resp.json().get("shards") or 1)
    here = shard_layout(cfg.shard_count, cfg.shard_ids)
    if cfg.shard_count is None:
        return Check(_NAME_DC, Status.OK, f"{here}: {recommended} now")
    detail = f"{here}; Discord recommends {recommended}"
    if recommended > cfg.shard_count:
        return Check(
            _NAME_DC,
            Status.WARNING,
            detail,
            f"set shard_count = {recommended} (or more) on every instance and share the ids "
            f"0-{recommended - 1} out among them with shard_ids",
        )
    return Check(_NAME_DC, Status.OK, detail)


def _ago(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"
