"""`toolpath catalog draft --openapi`: tools, identifier states and outputs drafted from OpenAPI
descriptions written here (and TMDB's, read from ../shared/data when present); bad descriptions refused."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from toolpath.planner import Workspace
from toolpath.registry import lint_catalogs
from toolpath.registry.openapi_draft import MAX_SPEC_BYTES, OpenAPIDraftError, draft_openapi_catalog, render_catalog

TMDB_DESCRIPTION = Path(__file__).resolve().parents[2] / "shared" / "data" / "taskplan" / "tmdb" / "tmdb_oas.json"

# A small library API of our own: books have authors, a search lists books, a book's loans are made by POST.
LIBRARY = {
    "openapi": "3.0.3",
    "info": {"title": "Town Library", "version": "1"},
    "servers": [{"url": "https://library.example.org/v2"}],
    "components": {
        "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Library-Key"}},
        "schemas": {
            "BookSummary": {"type": "object", "properties": {"id": {"type": "integer"}, "title": {"type": "string"}, "shelf_mark": {"type": "string"}}},
            "AuthorSummary": {"type": "object", "properties": {"id": {"type": "integer"}, "full_name": {"type": "string"}}},
            "Author": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "full_name": {"type": "string"}, "born_in": {"type": "string", "description": "Town of birth."}},
            },
        },
    },
    "paths": {
        "/books/search": {
            "get": {
                "operationId": "searchBooks",
                "summary": "Search books by title",
                "parameters": [
                    {"name": "q", "in": "query", "required": True, "schema": {"type": "string"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 10}},
                ],
                "responses": {
                    "200": {
                        "description": "hits",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"results": {"type": "array", "items": {"$ref": "#/components/schemas/BookSummary"}}},
                                }
                            }
                        },
                    }
                },
            }
        },
        "/books/{book_id}": {
            "parameters": [{"name": "book_id", "in": "path", "required": True, "schema": {"type": "integer"}}],
            "get": {
                "operationId": "getBook",
                "summary": "A book's details",
                "responses": {
                    "200": {
                        "description": "the book",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "id": {"type": "integer"},
                                        "title": {"type": "string"},
                                        "shelf_mark": {"type": "string"},
                                        "page_count": {"type": "integer"},
                                        "writers": {"type": "array", "items": {"$ref": "#/components/schemas/AuthorSummary"}},
                                    },
                                }
                            }
                        },
                    }
                },
            },
        },
        "/authors/{author_id}": {
            "get": {
                "operationId": "getAuthor",
                "parameters": [{"name": "author_id", "in": "path", "required": True, "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "x", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Author"}}}}},
            }
        },
        "/books/{book_id}/loans": {
            "post": {
                "operationId": "lendBook",
                "parameters": [{"name": "book_id", "in": "path", "required": True, "schema": {"type": "integer"}}],
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {"type": "object", "required": ["reader"], "properties": {"reader": {"type": "string"}, "weeks": {"type": "integer"}}}
                        }
                    }
                },
                "responses": {"201": {"description": "lent"}},
            }
        },
    },
}


def write(directory: Path, name: str, content: object) -> Path:
    path = directory / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def tool(document: dict, name: str) -> dict:
    return next(entry for entry in document["tools"] if entry["name"] == name)


def test_operations_become_tools_with_http_parameters_and_approval(tmp_path):
    document, todos, _ = draft_openapi_catalog(str(write(tmp_path, "library.json", LIBRARY)))
    assert document["domain"] == "town_library"
    api = document["http_apis"]["town_library"]
    assert api["base_url"] == "https://library.example.org/v2"
    assert api["auth"] == {"scheme": "api_key", "env": "TOWN_LIBRARY_API_KEY", "in": "header", "name": "X-Library-Key"}
    search = tool(document, "search_books")
    assert search["http"] == {"api": "town_library", "method": "GET", "path": "/books/search", "query": ["q", "limit"]}
    assert search["required_parameters"] == [{"name": "q", "type": "str"}]
    assert search["optional_parameters"] == [{"name": "limit", "type": "int", "default": 10}]
    lend = tool(document, "lend_book")
    assert lend["approval"] == "always" and "approval" not in search
    assert lend["http"]["body"] == ["reader", "weeks"]
    assert [parameter["name"] for parameter in lend["required_parameters"]] == ["book_id", "reader"]
    assert "lend_book" not in todos or all("operationId" not in note for note in todos["lend_book"])


def test_identifiers_flow_from_the_responses_that_hold_them(tmp_path):
    document, _, _ = draft_openapi_catalog(str(write(tmp_path, "library.json", LIBRARY)), domain="library")
    tokens = {state["token"] for state in document["states"]}
    assert {"library.book_id", "library.author_id"} <= tokens
    search, book, author = tool(document, "search_books"), tool(document, "get_book"), tool(document, "get_author")
    assert search["outputs"] == {"library.book_id": "results[0].id"}
    # The writers are authors by their shape (a full_name, as an author has), though the property is not named so.
    assert book["outputs"] == {"library.author_id": "writers[0].id"}
    assert book["state_transition"]["requires"] == ["library.book_id"]
    assert book["required_parameters"][0] == {"name": "book_id", "type": "int", "state": "library.book_id"}
    assert author["state_transition"]["requires"] == ["library.author_id"]
    result = next(state for state in document["states"] if state["token"] == "library.author_details")
    assert "Town of birth." in result["affordances"] and "author born in" in result["affordances"]


def test_a_lookup_by_text_is_offered_as_finding_the_resource_by_name(tmp_path):
    document, _, _ = draft_openapi_catalog(str(write(tmp_path, "library.json", LIBRARY)), domain="library")
    # search_books takes the free text `q` and gives book ids: people name the book they mean.
    assert {"find a book by its name", "look up a book by name"} <= set(tool(document, "search_books")["affordances"])
    # Nothing else looks books up by text: getBook takes an id, lendBook's text goes in its body.
    assert not any("by name" in text for name in ("get_book", "get_author", "lend_book") for text in tool(document, name)["affordances"])


def test_a_summary_several_operations_share_is_no_affordance(tmp_path):
    library = json.loads(json.dumps(LIBRARY))
    library["paths"]["/authors/{author_id}"]["get"]["summary"] = "A book's details"  # now two operations say it
    document, _, _ = draft_openapi_catalog(str(write(tmp_path, "library.json", library)), domain="library")
    for name, token in (("get_book", "library.book_details"), ("get_author", "library.author_details")):
        state = next(state for state in document["states"] if state["token"] == token)
        assert "A book's details" not in tool(document, name)["affordances"] + state["affordances"]
        assert tool(document, name)["description"].startswith("A book's details")
    assert "Search books by title" in tool(document, "search_books")["affordances"]  # one operation's own summary stays


def test_an_operation_returning_a_copy_of_a_resource_gets_no_field_phrases(tmp_path):
    library = json.loads(json.dumps(LIBRARY))
    book = library["paths"]["/books/{book_id}"]["get"]["responses"]
    library["paths"]["/books/newest"] = {"get": {"operationId": "getNewestBook", "summary": "The book added last", "responses": book}}
    document, _, _ = draft_openapi_catalog(str(write(tmp_path, "library.json", library)), domain="library")
    states = {state["token"]: state for state in document["states"]}
    assert "book page count" in states["library.book_details"]["affordances"]
    # The newest book is a book: "the page count of a book" is the book's details, not the newest one's.
    assert states["library.books_newest"]["affordances"] == ["The book added last"]


def test_the_draft_validates_and_plans_the_chain(tmp_path):
    document, todos, notes = draft_openapi_catalog(str(write(tmp_path, "library.json", LIBRARY)), domain="library")
    text = render_catalog(document, todos, notes, "library.json", "2025-01-01")
    assert yaml.safe_load(text) == document  # the comments are comments: the data is the draft's
    catalog = write(tmp_path, "library.yaml", text)
    result = subprocess.run([sys.executable, "-m", "toolpath.planner.interfaces.cli", "validate", str(catalog)], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert lint_catalogs([catalog]) == []  # a description that says everything leaves nothing to decide
    workspace = Workspace.open([catalog])
    plan = workspace.plan_task("where was the writer of the book Moby Dick born").plan
    assert [step.tool.name for step in plan.steps] == ["search_books", "get_book", "get_author"]


@pytest.mark.parametrize(
    ("said", "description"),
    [
        ({"summary": "List pets", "description": "Lists every pet in the shop. Sorted by name."}, "List pets — Lists every pet in the shop. (GET /pets)"),
        ({"summary": "List pets"}, "List pets (GET /pets)"),
        ({"description": "Lists every pet in the shop. Sorted by name."}, "Lists every pet in the shop. (GET /pets)"),
        ({}, "GET /pets"),
        ({"summary": "  ", "description": "\n"}, "GET /pets"),
        ({"summary": "List pets", "description": "list pets."}, "List pets (GET /pets)"),  # the description only repeats the summary
        ({"summary": "—", "description": "Lists every pet."}, "Lists every pet. (GET /pets)"),  # a summary with no word in it
        ({"summary": "List pets", "description": "..."}, "List pets (GET /pets)"),
    ],
    ids=["both", "summary", "description", "neither", "blank", "repeated", "dash-summary", "dots-description"],
)
def test_a_tool_description_is_clean_whatever_the_operation_says(tmp_path, said, description):
    described = {"openapi": "3.0.3", "info": {"title": "Shop"}, "paths": {"/pets": {"get": {"operationId": "listPets", **said, "responses": {}}}}}
    document, _, _ = draft_openapi_catalog(str(write(tmp_path, "shop.json", described)))
    assert tool(document, "list_pets")["description"] == description


def test_swagger_two_is_drafted_with_body_and_host(tmp_path):
    swagger = {
        "swagger": "2.0",
        "info": {"title": "Pets"},
        "host": "pets.example.org",
        "basePath": "/api",
        "schemes": ["https"],
        "definitions": {"Pet": {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}},
        "paths": {
            "/pets/{id}": {
                "get": {
                    "parameters": [{"name": "id", "in": "path", "required": True, "type": "integer"}],
                    "responses": {"200": {"description": "x", "schema": {"$ref": "#/definitions/Pet"}}},
                }
            },
            "/pets": {
                "post": {
                    "parameters": [{"name": "pet", "in": "body", "schema": {"$ref": "#/definitions/Pet"}}],
                    "responses": {"200": {"description": "x", "schema": {"$ref": "#/definitions/Pet"}}},
                }
            },
        },
    }
    document, todos, notes = draft_openapi_catalog(str(write(tmp_path, "pets.yaml", yaml.safe_dump(swagger))))
    assert document["http_apis"]["pets"]["base_url"] == "https://pets.example.org/api"
    get, create = tool(document, "get_pets_by_id"), tool(document, "post_pets")
    assert get["required_parameters"] == [{"name": "id", "type": "int", "state": "pets.pet_id"}]
    assert create["http"]["body"] == ["id", "name"] and create["outputs"] == {"pets.pet_id": "id"}
    # No operationId anywhere: named from method and path, each said in a TODO and in the notes.
    assert all(any("no operationId" in note for note in todos[name]) for name in ("get_pets_by_id", "post_pets"))
    assert any("2 operations have no operationId" in note for note in notes)
    text = render_catalog(document, todos, notes, "pets.yaml", "2025-01-01")
    assert "# TODO: get_pets_by_id: no operationId: named from `GET /pets/{id}`" in text
    # Every decision the draft left is a TP019 warning at its line, until the author deletes the comment.
    catalog = write(tmp_path, "pets-catalog.yaml", text)
    todo_lines = [number for number, line in enumerate(text.splitlines(), start=1) if line.startswith("# TODO:")]
    findings = lint_catalogs([catalog])
    assert todo_lines and [(finding.code, finding.line) for finding in findings] == [("TP019", number) for number in todo_lines]
    assert any("TP019 warning: left for the author: get_pets_by_id: no operationId" in str(finding) for finding in findings)
    catalog.write_text("\n".join(line for line in text.splitlines() if not line.startswith("# TODO:")) + "\n")
    assert lint_catalogs([catalog]) == []


def test_line_breaks_in_what_a_description_names_stay_inside_their_comment(tmp_path):
    # A hostile description's path and security scheme names carry line breaks (YAML also breaks lines
    # at U+2028 and U+0085): written raw into a TODO comment, they would add catalog entries of their own.
    smuggled = "\nmcp_servers: {evil: {command: sh}}\n#"
    described = {
        **LIBRARY,
        "components": {"securitySchemes": {f"key{smuggled}": {"type": "http", "scheme": "bearer"}, "other": {"type": "http", "scheme": "basic"}}},
        "paths": {f"/shelves\u2028- name: injected{smuggled}": {"get": {"responses": {"200": {"description": "the shelves"}}}}},
    }
    document, todos, notes = draft_openapi_catalog(str(write(tmp_path, "hostile.json", described)))
    text = render_catalog(document, todos, notes, "hostile.json", "2025-01-01")
    assert yaml.safe_load(text) == document  # nothing but the drafted catalog: no key or tool added by a comment
    assert "# TODO: the description offers 2 security schemes (key\\nmcp_servers: {evil: {command: sh}}\\n#, other)" in text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("\x00\xff binary", "not a text file"),
        ("just: [some, words", "not valid YAML"),
        ('{"openapi": "3.0.0", "paths": ', "not valid JSON"),
        ("a plain sentence", "holds str, not an OpenAPI description"),
        (json.dumps({"info": {}, "paths": {}}), "no `openapi: 3.x`"),
    ],
)
def test_files_that_are_not_descriptions_are_refused_by_name(tmp_path, content, message):
    path = tmp_path / "spec.txt"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(OpenAPIDraftError, match=message) as raised:
        draft_openapi_catalog(str(path))
    assert str(path) in str(raised.value)


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        ({"paths": {"/books": {"get": {"responses": ["200"]}}}}, r"paths\./books\.get\.responses must be an object, not list"),
        ({"paths": {"/books": {"post": {"requestBody": {"content": ["application/json"]}}}}}, r"requestBody\.content must be an object, not list"),
        ({"paths": {"/books": {"get": {"parameters": {"q": {"in": "query"}}}}}}, r"paths\./books\.get\.parameters must be a list, not dict"),
        (
            {"paths": {"/books": {"post": {"requestBody": {"content": {"application/json": {"schema": {"allOf": 5}}}}}}}},
            r"requestBody\.schema\.allOf must be a list, not int",
        ),
        ({"servers": [{"url": "https://{host}", "variables": ["host"]}]}, r"servers\[0\]\.variables must be an object, not list"),
        ({"components": ["schemas"], "paths": {"/books": {"get": {}}}}, r"components must be an object, not list"),
        ({"paths": {"/books": {"$ref": "#/openapi/version"}}}, r"\$ref '#/openapi/version' names nothing in the description"),
    ],
)
def test_a_description_of_the_wrong_shape_is_refused_naming_the_field(tmp_path, changed, message):
    with pytest.raises(OpenAPIDraftError, match=message):
        draft_openapi_catalog(str(write(tmp_path, "odd.json", {**LIBRARY, **changed})))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"openapi": "3.0.0", "paths": {"/a": {"get": {"x-n": ' + "9" * 5000 + "}}}}", "not JSON Python can read"),
        ('{"openapi": "3.0.0", "paths": {"/a": {"get": {"x-n": ' + "[" * 100_000 + "]" * 100_000 + "}}}}", "nested too deeply"),
        ("openapi: 3.0.0\npaths: " + "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_json_or_yaml_python_cannot_hold_is_refused_on_the_command_line(tmp_path, content, message):
    result = run_cli("--openapi", str(write(tmp_path, "odd.json", content)), "--json", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert message in json.loads(result.stdout)["error"]


def test_a_ref_loop_is_refused_naming_the_chain(tmp_path):
    looped = json.loads(json.dumps(LIBRARY))
    looped["components"]["schemas"]["BookSummary"] = {"$ref": "#/components/schemas/Shelf"}
    looped["components"]["schemas"]["Shelf"] = {"$ref": "#/components/schemas/BookSummary"}
    with pytest.raises(
        OpenAPIDraftError, match=r"\$ref loop .*Shelf → #/components/schemas/BookSummary.*paths\./books/search|paths\./books/search.*\$ref loop"
    ):
        draft_openapi_catalog(str(write(tmp_path, "loop.json", looped)))


def test_a_recursive_schema_is_drafted(tmp_path):
    recursive = json.loads(json.dumps(LIBRARY))
    recursive["components"]["schemas"]["BookSummary"]["properties"]["sequel"] = {"$ref": "#/components/schemas/BookSummary"}
    document, _, _ = draft_openapi_catalog(str(write(tmp_path, "recursive.json", recursive)), domain="library")
    assert tool(document, "search_books")["outputs"] == {"library.book_id": "results[0].id"}


def test_shared_schemas_nested_many_times_over_are_drafted_quickly_with_a_todo(tmp_path):
    # YAML aliases: each level is 30 fields all holding the level below, 8 deep; a 4 kB file whose
    # response schema expands to 30**6 fields within the depth limit.
    lines = ["openapi: 3.0.0", "info: {title: nest, version: '1'}", "x-levels:", "  l0: &l0 {type: object, properties: {id: {type: integer}}}"]
    for level in range(1, 9):
        fields = ", ".join(f"part{index}_id: *l{level - 1}" for index in range(30))
        lines.append(f"  l{level}: &l{level} {{type: object, properties: {{{fields}}}}}")
    lines += [
        "paths:",
        "  /things/{thing_id}:",
        "    get:",
        "      operationId: getThing",
        "      parameters: [{name: thing_id, in: path, required: true, schema: {type: integer}}]",
        "      responses: {'200': {description: ok, content: {application/json: {schema: *l8}}}}",
    ]
    started = time.monotonic()
    _, todos, _ = draft_openapi_catalog(str(write(tmp_path, "nested.yaml", "\n".join(lines) + "\n")))
    assert time.monotonic() - started < 10
    assert any("nests shared parts past" in note for note in todos["get_thing"])


def test_a_description_over_the_size_limit_is_refused(tmp_path):
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(LIBRARY) + " " * MAX_SPEC_BYTES)
    with pytest.raises(OpenAPIDraftError, match=r"huge\.json: the description is 10\.0 MB; toolpath drafts from at most 10 MB"):
        draft_openapi_catalog(str(path))


def test_names_that_meet_after_sanitising_are_refused_naming_both(tmp_path):
    colliding = json.loads(json.dumps(LIBRARY))
    colliding["paths"]["/books/{book_id}"]["get"]["operationId"] = "search-books"
    with pytest.raises(OpenAPIDraftError, match=r"paths\./books/\{book_id\}\.get and paths\./books/search\.get both become the tool name 'search_books'"):
        draft_openapi_catalog(str(write(tmp_path, "collide.json", colliding)))


def test_an_external_or_missing_ref_is_refused(tmp_path):
    missing = json.loads(json.dumps(LIBRARY))
    missing["paths"]["/authors/{author_id}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] = {"$ref": "#/components/schemas/Nobody"}
    with pytest.raises(OpenAPIDraftError, match=r"\$ref '#/components/schemas/Nobody' names nothing"):
        draft_openapi_catalog(str(write(tmp_path, "missing.json", missing)))
    missing["paths"]["/authors/{author_id}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] = {"$ref": "other.yaml#/Author"}
    with pytest.raises(OpenAPIDraftError, match="points outside the description"):
        draft_openapi_catalog(str(write(tmp_path, "external.json", missing)))


def test_an_unreachable_url_is_refused():
    with pytest.raises(OpenAPIDraftError, match=r"http://127\.0\.0\.1:9/openapi\.json: cannot fetch the description"):
        draft_openapi_catalog("http://127.0.0.1:9/openapi.json")


def run_cli(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "catalog", "draft", *arguments], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_command_line_writes_the_draft_and_refuses_bad_input(tmp_path):
    spec = write(tmp_path, "library.json", LIBRARY)
    result = run_cli("--openapi", str(spec), "--domain", "library", "--output", "library.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "wrote library.yaml" in result.stderr
    drafted = yaml.safe_load((tmp_path / "library.yaml").read_text())
    assert tool(drafted, "get_book")["outputs"] == {"library.author_id": "writers[0].id"}
    again = run_cli("--openapi", str(spec), "--output", "library.yaml", cwd=tmp_path)
    assert again.returncode != 0 and "exists; pass --force" in again.stderr
    broken = write(tmp_path, "broken.json", "{not json")
    refused = run_cli("--openapi", str(broken), cwd=tmp_path)
    assert refused.returncode != 0 and "broken.json: line 1: not valid JSON" in refused.stderr and "Traceback" not in refused.stderr
    both = run_cli("--openapi", str(spec), "--mcp", "server", cwd=tmp_path)
    assert both.returncode != 0 and "not allowed with argument" in both.stderr


def test_command_line_json_reports_the_draft_for_a_program(tmp_path):
    # The library, plus an operation without operationId: a TODO for it and a note for the catalog.
    described = {**LIBRARY, "paths": {**LIBRARY["paths"], "/shelves": {"get": {"responses": {"200": {"description": "the shelves"}}}}}}
    spec = write(tmp_path, "library.json", described)
    result = run_cli("--openapi", str(spec), "--domain", "library", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)  # standard output holds the JSON object and nothing else
    assert (report["kind"], report["source"], report["output"], report["domain"], report["api"], report["server"]) == (
        "openapi",
        str(spec),
        None,
        "library",
        "library",
        None,
    )
    document = yaml.safe_load(report["catalog"])  # without --output the catalog is in the object
    assert report["tools"] == [entry["name"] for entry in document["tools"]] == ["search_books", "get_book", "get_author", "lend_book", "get_shelves"]
    assert report["states"] == [state["token"] for state in document["states"]] and "library.book_id" in report["states"]
    assert report["approval_always"] == ["lend_book"]
    assert {"tool": None, "text": "1 operation has no operationId: named from method and path (see each TODO)"} in report["todos"]
    assert {"tool": "get_shelves", "text": "no operationId: named from `GET /shelves`; rename it"} in report["todos"]
    assert report["left_out"] == []
    # The lint findings are validate's: each TODO comment is a TP019 warning at its line of the catalog text.
    todo_lines = [number for number, line in enumerate(report["catalog"].splitlines(), start=1) if line.startswith("# TODO:")]
    assert [(finding["code"], finding["line"], finding["path"]) for finding in report["findings"]] == [("TP019", line, None) for line in todo_lines]
    assert (report["errors"], report["warnings"]) == (0, len(todo_lines)) and len(todo_lines) == len(report["todos"])

    written = run_cli("--openapi", str(spec), "--domain", "library", "--output", "library.yaml", "--json", cwd=tmp_path)
    assert written.returncode == 0 and written.stderr == ""
    report = json.loads(written.stdout)
    assert report["output"] == "library.yaml" and report["catalog"] is None
    assert yaml.safe_load((tmp_path / "library.yaml").read_text()) == document
    assert {finding["path"] for finding in report["findings"]} == {"library.yaml"}

    exists = run_cli("--openapi", str(spec), "--output", "library.yaml", "--json", cwd=tmp_path)
    assert exists.returncode == 2 and json.loads(exists.stdout) == {"error": "library.yaml exists; pass --force to overwrite it"}
    missing = run_cli("--openapi", "nowhere.json", "--json", cwd=tmp_path)
    assert missing.returncode == 2 and json.loads(missing.stdout)["error"].startswith("nowhere.json: cannot read the description")


def test_an_output_that_is_no_regular_file_is_refused_not_replaced(tmp_path):
    # The draft is written beside the output and renamed over it: over a pipe or a device
    # (--output /dev/stdout, run as root) that would put a plain file in its place.
    spec = write(tmp_path, "library.json", LIBRARY)
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for output in (pipe, tmp_path):
        result = run_cli("--openapi", str(spec), "--output", str(output), "--force", "--json", cwd=tmp_path)
        assert result.returncode == 2 and json.loads(result.stdout) == {"error": f"{output} is not a regular file; give the path of a file to write"}
    assert stat.S_ISFIFO(pipe.stat().st_mode) and sorted(path.name for path in tmp_path.iterdir()) == ["library.json", "pipe"]


@pytest.mark.skipif(not TMDB_DESCRIPTION.exists(), reason="TMDB's OpenAPI description (../shared/data/taskplan/tmdb) is not on this machine")
def test_tmdb_draft_chains_person_credits_and_movie_details(tmp_path):
    started = time.perf_counter()
    document, todos, _ = draft_openapi_catalog(str(TMDB_DESCRIPTION), domain="tmdb")
    assert time.perf_counter() - started < 20  # the ≤ 2 s target is measured in benchmarks/bench_openapi_draft.py
    assert len(document["tools"]) == 54
    search_person = next(entry for entry in document["tools"] if entry["http"]["path"] == "/search/person")
    person_movies = next(entry for entry in document["tools"] if entry["http"]["path"] == "/person/{person_id}/movie_credits")
    movie_credits = next(entry for entry in document["tools"] if entry["http"]["path"] == "/movie/{movie_id}/credits")
    # A person's known_for is one of a movie or a show: its first id could be either, so none is passed on as a movie's.
    assert search_person["outputs"] == {"tmdb.person_id": "results[0].id"}
    # Trending's schema names its list "" (no output path reaches it): the list is read from the example.
    trending = next(entry for entry in document["tools"] if entry["http"]["path"].startswith("/trending/"))
    assert trending["outputs"] == {"tmdb.movie_id": "results[0].id"}
    assert person_movies["outputs"]["tmdb.movie_id"] == "cast[0].id"  # a person's cast entries are movies
    assert movie_credits["outputs"]["tmdb.person_id"] == "cast[0].id"  # a movie's cast entries are people
    assert document["http_apis"]["tmdb"]["auth"] == {"scheme": "api_key", "env": "TMDB_API_KEY", "in": "query", "name": "api_key"}
    details = next(state for state in document["states"] if state["token"] == "tmdb.person_details")
    assert {"person birthday", "person place of birth", "person biography"} <= set(details["affordances"])
    assert any("season_number" in note for notes in todos.values() for note in notes)
    catalog = write(tmp_path, "tmdb.yaml", yaml.safe_dump(document, sort_keys=False))
    plan = (
        Workspace.open([catalog]).plan_task(["find the person Tom Hanks", "list the movie credits of that person", "get the details of the first movie"]).plan
    )
    names = [step.tool.name for step in plan.steps]
    assert names == [search_person["name"], person_movies["name"], "get_movie_movie_id"]
