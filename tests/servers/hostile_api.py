"""An HTTP API that misbehaves on purpose, for the attack tests of HTTP tools: a Starlette app served
by uvicorn on 127.0.0.1:PORT (``python hostile_api.py PORT``).

- ``GET /echo/{rest:path}``: ``{"path", "query", "headers"}`` as the request arrived (what was sent),
  and ``"port"``, the client's port: one per connection, so two requests with one port came on one;
- ``GET /cookie``: sets the cookie ``session=visitor-1`` (to see whether a later request sends it back);
- ``GET /redirect?to=URL``: a 302 to ``URL`` (another host's, to see which credentials follow);
- ``GET /bomb?megabytes=N``: N MB of zeros gzip-compressed (about 1/1000 of that on the wire);
- ``GET /drip?seconds=S``: a JSON string sent one byte every 0.2 s for S seconds: each read is
  quick, the whole answer is not;
- ``GET /later/{key}``: the first request for ``key`` answers 503 with ``Retry-After: 2``, the next ``"ok"``;
- ``GET /circle``: a 302 to itself, for ever;
- ``GET /garbled``: a body that says it is gzip-compressed and is not;
- ``GET /nested?depth=N``: a JSON list nested N deep (``[[[...]]]``).
"""

import asyncio
import gzip
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"path": request.scope["raw_path"].decode(), "query": request.url.query, "headers": dict(request.headers), "port": request.client.port})


async def cookie(request: Request) -> JSONResponse:
    response = JSONResponse("set")
    response.set_cookie("session", "visitor-1")
    return response


async def redirect(request: Request) -> RedirectResponse:
    return RedirectResponse(request.query_params["to"], status_code=302)


async def bomb(request: Request) -> Response:
    body = gzip.compress(b"0" * (int(request.query_params["megabytes"]) * 1_000_000), compresslevel=9)
    return Response(body, media_type="application/json", headers={"Content-Encoding": "gzip"})


async def drip(request: Request) -> StreamingResponse:
    seconds = float(request.query_params["seconds"])

    async def chunks():
        yield b'"'
        for _ in range(int(seconds / 0.2)):
            await asyncio.sleep(0.2)
            yield b"x"
        yield b'"'

    return StreamingResponse(chunks(), media_type="application/json")


async def circle(request: Request) -> RedirectResponse:
    return RedirectResponse("/circle", status_code=302)


async def garbled(request: Request) -> Response:
    return Response(b"plain words, not gzip", media_type="application/json", headers={"Content-Encoding": "gzip"})


async def nested(request: Request) -> Response:
    depth = int(request.query_params["depth"])
    return Response(b"[" * depth + b"]" * depth, media_type="application/json")


asked: set[str] = set()


async def later(request: Request) -> JSONResponse:
    key = request.path_params["key"]
    if key not in asked:
        asked.add(key)
        return JSONResponse({"message": "come back later"}, 503, headers={"Retry-After": "2"})
    return JSONResponse("ok")


app = Starlette(
    routes=[
        Route("/later/{key}", later),
        Route("/echo/{rest:path}", echo),
        Route("/cookie", cookie),
        Route("/redirect", redirect),
        Route("/bomb", bomb),
        Route("/drip", drip),
        Route("/circle", circle),
        Route("/garbled", garbled),
        Route("/nested", nested),
    ]
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
