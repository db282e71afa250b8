"""An HTTP API that fails on purpose, for the retry and size-cap tests of HTTP tools: a Starlette
app served by uvicorn on 127.0.0.1:PORT (``python flaky_api.py PORT``).

- ``GET /flaky/{key}?fails=N&status=503&retry_after=S``: the first N requests for ``key`` answer
  ``status`` (with ``Retry-After: S`` when given), the next ``{"key": key, "tries": N + 1}``;
- ``POST /flaky/{key}``: the same, for a method that is not repeated after a 5xx;
- ``GET /stream?bytes=N``: N bytes of a JSON string, sent in 64 KiB chunks 5 ms apart without a
  Content-Length (200 MB take 15 s: a client that stops at its cap is done far sooner);
- ``GET /__tries/{key}``: how many requests ``key`` got.
"""

import asyncio
import sys
from collections import Counter

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

tries: Counter = Counter()


async def flaky(request: Request) -> JSONResponse:
    key = request.path_params["key"]
    tries[key] += 1
    if tries[key] <= int(request.query_params.get("fails", "0")):
        retry_after = request.query_params.get("retry_after")
        headers = {"Retry-After": retry_after} if retry_after else {}
        return JSONResponse({"message": f"try {tries[key]} refused on purpose"}, int(request.query_params.get("status", "503")), headers=headers)
    return JSONResponse({"key": key, "tries": tries[key]})


async def stream(request: Request) -> StreamingResponse:
    size = int(request.query_params["bytes"])

    async def chunks():
        yield b'"'
        for start in range(0, size, 65536):
            yield b"x" * min(65536, size - start)
            await asyncio.sleep(0.005)
        yield b'"'

    return StreamingResponse(chunks(), media_type="application/json")


async def count(request: Request) -> JSONResponse:
    return JSONResponse(tries[request.path_params["key"]])


app = Starlette(routes=[Route("/flaky/{key}", flaky, methods=["GET", "POST"]), Route("/stream", stream), Route("/__tries/{key}", count)])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
