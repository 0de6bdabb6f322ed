"""Serve N fake brokers from one separate process (so their CPU is not the controller's).

    python benchmarks/_broker_server.py COUNT WIDTH HEIGHT READY_FILE [--realistic-frames]

Writes {"urls": [...], "token": "..."} to READY_FILE and serves until killed. With
``--realistic-frames`` every frame is a detailed 1920x1080-like PNG (noise and line work,
roughly the size of a real CAD screenshot) instead of the fake's solid colour.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import sys
from pathlib import Path

from autocad_bench.providers.models import DisplaySize
from autocad_bench.testing import fake_broker
from autocad_bench.testing.fake_broker import FakeBroker


def realistic_png(width: int, height: int) -> bytes:
    from PIL import Image, ImageDraw

    rng = random.Random(7)
    image = Image.new("RGB", (width, height), (33, 33, 33))
    draw = ImageDraw.Draw(image)
    for _ in range(600):
        x, y = rng.randrange(width), rng.randrange(height)
        draw.line([(x, y), (x + rng.randrange(-300, 300), y + rng.randrange(-300, 300))],
                  fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)), width=1)
    for _ in range(200):
        x, y = rng.randrange(width), rng.randrange(height)
        draw.text((x, y), "LINE 100,0 CIRCLE 20", fill=(220, 220, 220))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


async def main(count: int, width: int, height: int, ready: Path, realistic: bool) -> None:
    if realistic:
        frame = realistic_png(width, height)
        fake_broker.png_frame = lambda w, h, sequence, injected: frame  # type: ignore[assignment]
    brokers = [FakeBroker(display=DisplaySize(width=width, height=height), token="benchmark-token-0123456789")
               for _ in range(count)]
    for broker in brokers:
        await broker.start()
    # Written whole under another name and renamed: the parent polls for the name and would
    # otherwise read a file that exists but is still empty (seen at 1,000 brokers under load).
    partial = ready.with_name(ready.name + ".partial")
    partial.write_text(json.dumps({"urls": [b.url for b in brokers], "token": brokers[0].token}))
    partial.replace(ready)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]),
                     "--realistic-frames" in sys.argv))
