"""The fake OpenAI server's speech and picture endpoints (a mixin of FakeOpenAI).

``POST /v1/audio/speech`` (JSON: model, voice, input, response_format) is recorded in
``llm.speech`` and answered with a real Ogg/Opus file (``tests/fixtures/speech.ogg``: 0.6 s of
a tone, made once with opusenc), or with the next of ``llm.script_speech(error(...))``. Asked for
another format than ``opus`` it answers 400, so a test sees what relaybot asked for.

``POST /v1/images/generations`` is recorded in ``llm.image_requests`` and answered with one
picture in base64 (``b64_json``): a real PNG carrying the prompt as its tag, or the next of
``llm.script_image(error(...))``. Like OpenAI, it refuses ``response_format`` for gpt-image
models and answers with a URL (which relaybot must not need) when ``b64_json`` was not asked for
by a DALL-E model.
"""

from __future__ import annotations

import base64
import collections
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.fakes.media import png

SPEECH_OGG = (Path(__file__).parent.parent / "fixtures" / "speech.ogg").read_bytes()
SIZES = frozenset({"256x256", "512x512", "1024x1024", "1792x1024", "1024x1792", "1536x1024"})


@dataclass(frozen=True, slots=True)
class Spoken:
    """One /audio/speech request, as received."""

    model: str
    voice: str
    input: str
    response_format: str


@dataclass(frozen=True, slots=True)
class Drawn:
    """One /images/generations request, as received, and the picture answered."""

    model: str
    prompt: str
    size: str
    png: bytes


class MediaEndpoints:
    """Speech and pictures; the server calls :meth:`_media_routes` and checks auth itself."""

    def _init_media(self) -> None:
        self.speech: list[Spoken] = []
        self.image_requests: list[Drawn] = []
        self._speech_script: collections.deque[Any] = collections.deque()
        self._image_script: collections.deque[Any] = collections.deque()

    def script_speech(self, *replies: Any) -> None:
        """Queue errors (``error(...)``) for the next /audio/speech requests."""
        self._speech_script.extend(replies)

    def script_image(self, *replies: Any) -> None:
        """Queue errors (``error(...)``) for the next /images/generations requests."""
        self._image_script.extend(replies)

    def _media_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/audio/speech", self._speak)
        app.router.add_post("/v1/images/generations", self._draw)

    def _refused(self, status: int, message: str) -> web.Response:
        body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
        return web.json_response(body, status=status)

    def _scripted_error(self, script: collections.deque[Any]) -> web.Response | None:
        if not script:
            return None
        reply = script.popleft()
        body = {"error": {"message": reply.message, "type": reply.type, "code": reply.code}}
        return web.json_response(body, status=reply.status)

    async def _speak(self, request: web.Request) -> web.Response:
        if (denied := self._check_auth(request)) is not None:  # type: ignore[attr-defined]
            return denied  # type: ignore[no-any-return]
        body = json.loads(await request.read())
        for key in ("model", "voice", "input"):
            if not isinstance(body.get(key), str) or not body[key]:
                return self._refused(400, f"Missing required parameter: '{key}'.")
        fmt = body.get("response_format", "mp3")
        self.speech.append(Spoken(body["model"], body["voice"], body["input"], fmt))
        if len(body["input"]) > 4096:
            return self._refused(400, "'input' is too long: at most 4096 characters.")
        if (failed := self._scripted_error(self._speech_script)) is not None:
            return failed
        if fmt != "opus":
            return self._refused(400, f"the fake serves opus only, not {fmt!r}")
        return web.Response(body=SPEECH_OGG, content_type="audio/ogg")

    async def _draw(self, request: web.Request) -> web.Response:
        if (denied := self._check_auth(request)) is not None:  # type: ignore[attr-defined]
            return denied  # type: ignore[no-any-return]
        body = json.loads(await request.read())
        model, prompt = str(body.get("model") or "dall-e-2"), body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            return self._refused(400, "Missing required parameter: 'prompt'.")
        size = str(body.get("size") or "1024x1024")
        if size not in SIZES:
            return self._refused(400, f"'{size}' is not one of the supported sizes.")
        fmt = body.get("response_format")
        if model.startswith("gpt-image") and fmt is not None:
            return self._refused(400, "Unknown parameter: 'response_format'.")
        picture = png(prompt[:40], width=4, height=4)
        self.image_requests.append(Drawn(model, prompt, size, picture))
        if (failed := self._scripted_error(self._image_script)) is not None:
            return failed
        if not model.startswith("gpt-image") and fmt != "b64_json":
            item = {"url": "https://images.invalid/picture.png"}
        else:
            item = {"b64_json": base64.b64encode(picture).decode()}
        return web.json_response({"created": 0, "data": [item]})
