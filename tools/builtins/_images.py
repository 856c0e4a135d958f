"""generate_image: a picture made from the model's description, sent into the chat.

The daemon gives it a :class:`Painter` (an OpenAI-compatible ``/images/generations`` endpoint,
``[media] image_model``; engine/models/_images.py) that also keeps to ``[limits]
images_per_day``. The picture goes to the user as a photo (or an attachment) through the tools'
files; the model is told it was sent, which is the marker the conversation keeps of it.
"""

from __future__ import annotations

from typing import Any, Protocol

from tools._base import Tool
from tools._result import File, ToolResult
from tools.errors import LLMError, RelaybotError

SIZES = ("1024x1024", "1792x1024", "1024x1792", "1536x1024", "1024x1536", "512x512", "256x256")
MAX_PROMPT = 4000


class PictureRefused(RelaybotError):
    """The painter will not make this picture now (a limit); the message says why."""


class Painter(Protocol):
    async def paint(self, prompt: str, size: str) -> bytes:
        """A PNG (or JPEG, WebP) of `prompt` at `size`; raises PictureRefused or LLMError."""
        ...


class GenerateImage(Tool):
    name = "generate_image"
    description = (
        "Make a picture from a description and send it to the user. Describe the subject, "
        "style and composition in detail, in English. Use it only when the user asks for a "
        "picture, drawing, image or illustration."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_PROMPT,
                "description": "What the picture shows, in detail.",
            },
            "size": {
                "type": "string",
                "enum": list(SIZES),
                "description": "Width x height in pixels; square unless the user wants another.",
            },
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }
    timeout_s = 180.0

    def __init__(self, painter: Painter, default_size: str = "1024x1024") -> None:
        self.painter = painter
        self.default_size = default_size

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        prompt = str(args["prompt"]).strip()
        size = str(args.get("size") or self.default_size)
        try:
            data = await self.painter.paint(prompt, size)
        except PictureRefused as exc:
            return ToolResult.fail(str(exc))
        except LLMError as exc:
            return ToolResult.fail(f"The picture could not be made: {exc}", retryable=False)
        suffix = _suffix(data)
        if suffix is None:
            return ToolResult.fail("The image endpoint sent something that is not a picture.")
        name = f"picture{suffix}"
        return ToolResult.with_files(f"Made a {size} picture of: {prompt[:200]}", File(name, data))

    def describe_call(self, args: dict[str, Any]) -> str:
        return f"make a picture of {str(args.get('prompt', ''))[:80]}"


def _suffix(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG"):
        return ".png"
    if data.startswith(b"\xff\xd8\xff"):
        return ".jpg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    return None
