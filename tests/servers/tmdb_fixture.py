"""A stand-in for TMDB's API (unreachable from the tests): a Starlette app serving a few responses
in TMDB's JSON shape (fixture data written for these tests, not TMDB's records), behind a bearer
token, and listing the requests it got at ``/__requests`` so a test can see which ids each call sent.

Run: ``python tmdb_fixture.py PORT TOKEN``; serves ``/3/search/person``, ``/3/person/{id}/movie_credits``
and ``/3/movie/{id}`` on 127.0.0.1:PORT with uvicorn.
"""

import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

PEOPLE = {
    "Ada Lindqvist": {"id": 70412, "name": "Ada Lindqvist", "known_for_department": "Directing", "popularity": 12.5},
    "Bo Hargreave": {"id": 88213, "name": "Bo Hargreave", "known_for_department": "Acting", "popularity": 3.1},
}
CREDITS = {
    70412: {
        "id": 70412,
        "cast": [{"id": 5521, "title": "The Lantern Keeper", "character": "Herself", "release_date": "2011-03-04"}],
        "crew": [{"id": 6630, "title": "Salt Roads", "job": "Director", "department": "Directing", "release_date": "2016-09-30"}],
    },
    88213: {"id": 88213, "cast": [], "crew": []},
}
MOVIES = {
    5521: {"id": 5521, "title": "The Lantern Keeper", "runtime": 97, "release_date": "2011-03-04", "overview": "A lighthouse keeper's last winter."},
    6630: {"id": 6630, "title": "Salt Roads", "runtime": 121, "release_date": "2016-09-30", "overview": "Two sisters cross a desert of salt."},
}
NOT_FOUND = {"success": False, "status_code": 34, "status_message": "The resource you requested could not be found."}


def app(token: str) -> Starlette:
    requests: list[dict] = []

    def authorised(request: Request) -> JSONResponse | None:
        requests.append(
            {"path": request.url.path, "query": dict(request.query_params), "authorised": request.headers.get("authorization") == f"Bearer {token}"}
        )
        if not requests[-1]["authorised"]:
            return JSONResponse({"success": False, "status_code": 7, "status_message": "Invalid API key: You must be granted a valid key."}, 401)
        return None

    async def search_person(request: Request) -> JSONResponse:
        refused = authorised(request)
        if refused:
            return refused
        query = request.query_params.get("query", "").lower()
        results = [person for name, person in PEOPLE.items() if query and query in name.lower()]
        return JSONResponse({"page": 1, "results": results, "total_pages": 1, "total_results": len(results)})

    async def movie_credits(request: Request) -> JSONResponse:
        refused = authorised(request)
        if refused:
            return refused
        found = CREDITS.get(request.path_params["person_id"])
        return JSONResponse(found) if found else JSONResponse(NOT_FOUND, 404)

    async def movie(request: Request) -> JSONResponse:
        refused = authorised(request)
        if refused:
            return refused
        found = MOVIES.get(request.path_params["movie_id"])
        return JSONResponse(found) if found else JSONResponse(NOT_FOUND, 404)

    async def seen(request: Request) -> JSONResponse:
        return JSONResponse(requests)

    return Starlette(
        routes=[
            Route("/3/search/person", search_person),
            Route("/3/person/{person_id:int}/movie_credits", movie_credits),
            Route("/3/movie/{movie_id:int}", movie),
            Route("/__requests", seen),
        ]
    )


if __name__ == "__main__":
    uvicorn.run(app(sys.argv[2]), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
