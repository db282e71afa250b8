"""Draft a catalog from an OpenAPI description: one tool per operation, with the states read from the data.

``toolpath catalog draft --openapi SPEC`` reads an OpenAPI 3.0/3.1 or Swagger 2.0 description (a
file, JSON or YAML, or an http(s) URL), follows its ``$ref``s with the ``referencing`` library (the
one ``jsonschema`` resolves with; only references inside the description: a reference to another
file or URL is refused, so drafting never reaches the network on its own), and writes a catalog in
the shape of issue 54: an ``http_apis`` entry for the API (base URL from ``servers``, or Swagger's
``host``/``basePath``/``schemes``; auth from ``securitySchemes``, its secret named as an environment
variable, never written), and one tool per operation with an ``http`` mapping.

What is drafted, and the rule each follows:

- **Names**: the ``operationId`` in snake case (``GetMovieCredits`` → ``get_movie_credits``), else
  the method and the path's literal segments (``GET /pets/{id}`` → ``get_pets_id``). Two operations
  whose names meet after that are refused (:class:`OpenAPIDraftError` names both): a catalog cannot
  hold two tools of one name, and which to rename is the author's call.
- **Descriptions**: the summary and the first sentence of the description, then the method and
  path (:func:`tool_description`: ``Search people — Finds people by name. (GET /search/person)``).
- **Parameters**: path, query and header parameters, and the top-level properties of a JSON request
  body (Swagger: the ``in: body`` schema), typed by
  :func:`toolpath.registry.type_strings.type_from_json_schema`; required ones first.
- **Identifier states**: a path parameter named ``id``, ``*_id`` or ``*Id`` is an identifier of a
  resource (``{person_id}`` → ``tmdb.person_id``; ``/pets/{id}`` → ``petstore.pet_id``); the
  parameter carries that state and its operation requires it. An operation *produces* it where its
  success response holds it: a field of that name (``credit_id``), or an ``id`` field of an object
  that is that resource. Which resource an object is, is decided by (1) its property's name
  (``production_companies`` → company), else (2) its shape: the share of its fields that the
  resource's own ``GET .../{resource_id}`` response also has (at least :data:`SHAPE_MIN_SHARE`, and
  the largest; so the ``cast`` of a movie's credits are people, the ``cast`` of a person's credits are
  movies), else (3) for the top-level object or list, the resource the path names
  (``/search/person``). The first such field, depth first, is the tool's ``outputs`` path
  (``results[0].id``, ``cast[0].id``, ``id``); others are named in a TODO.
- **Result states**: every operation produces a state of its own (``tmdb.movie_credits``), whose
  affordances are the operation's summary and first sentence of its description, and one short
  phrase per distinctive field of its response (``movie budget``, ``crew job``; a field is
  distinctive when at most :data:`DISTINCTIVE_SHARE` of the operations' responses have it), with the
  field's description where the schema gives one. Search matches a request against each affordance on its own
  (the best one counts), so short phrases in a person's words do better than one long list.
  An operation that returns a copy of a resource it does not take the id of (``GET /movie/latest``
  answers as ``GET /movie/{movie_id}`` does) gets no field phrases: they are that resource's, and
  already on its own result.
  A summary that several operations share (TMDB's "Get Details", "Get Images") is left out of the
  affordances of the tools and their states (it stays in the description): matched on its own, it
  scores every one of them alike, and "show its details" would take any of them.
- **Lookups**: a ``GET`` that takes a required text in the query string (``?query=``, ``?q=``,
  ``?title=``) and gives a resource's id finds that resource from the words a person names it with:
  its tool also has the affordances ``find a movie by its name`` and ``look up a movie by name``
  (``by its title`` for a ``title`` parameter), so a request naming "the movie Inception" looks the
  movie up rather than taking the first of a listing.
- ``POST``/``PUT``/``PATCH``/``DELETE`` operations are drafted ``approval: always``.
- What cannot be decided is a ``# TODO:`` comment above the tool (a value that is not an
  identifier but that a response carries, several paths to one identifier, a request body that is
  not JSON, a parameter whose name cannot be one...).

Limits: descriptions of at most :data:`MAX_SPEC_BYTES` bytes; schemas looked into at most
:data:`MAX_SCHEMA_DEPTH` levels deep (recursive schemas stop where they repeat) and at most
:data:`MAX_SCHEMA_VISITS` schema nodes per response or request body (a TODO says where that cut it short).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from toolpath.errors import Refusal
from toolpath.registry.names import python_identifier
from toolpath.registry.type_strings import type_from_json_schema

#: The largest description read, in bytes (a URL's body, a file). The largest public description we
#: know of (GitHub's REST API, about 11 MB as JSON) is over it on purpose: split such an API by tag first.
MAX_SPEC_BYTES = 10_000_000
#: How deep response schemas are looked into for identifiers and fields (TMDB's deepest id is 3 down).
MAX_SCHEMA_DEPTH = 6
#: How many schema nodes one response or request body may be looked into: shared schemas nested in one
#: another (YAML aliases or ``$ref``s, 30 fields each 8 deep: a 4 kB file) expand to billions of fields
#: while each is only 6 deep. TMDB's largest response has 61 fields.
MAX_SCHEMA_VISITS = 20_000
#: Seconds to wait for a description fetched by URL.
FETCH_TIMEOUT_SECONDS = 30
#: The least share of an object's fields that a resource's own response must have for the object to
#: be taken as that resource (TMDB: a movie credit's ``cast`` item shares 3 of 7 fields with a person).
SHAPE_MIN_SHARE = 0.3
#: A response field is distinctive (an affordance of its operation's result) when at most this share
#: of the operations' responses have it: ``id``, ``name``, ``page`` say nothing about an operation.
DISTINCTIVE_SHARE = 0.2
#: Names of a query parameter that takes free text to look things up with (``?query=``, ``?q=``): a
#: lookup by such a parameter finds things by their name (see ``OpenAPIDrafter._lookup_phrases``).
_FREE_TEXT_PARAMETERS = {"query", "q", "search", "term", "text", "keyword", "filter"}
#: The least share of an operation's top-level response fields that a resource's own response must
#: have for the operation to return a copy of that resource (TMDB: ``/movie/latest`` has all of a
#: movie's; a listing has ``page`` and ``results``, none).
COPY_MIN_SHARE = 0.8
#: The fewest top-level fields that show a copy: ``{"genres": [...]}`` (TMDB's genre list) has one
#: field of a movie's, and is no movie.
COPY_MIN_FIELDS = 3
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
_EFFECT_METHODS = {"post", "put", "patch", "delete"}
_PARAMETER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_ROOT = "urn:toolpath:openapi-description"


class OpenAPIDraftError(Refusal, ValueError):
    """A description that cannot be drafted: the message names the file or URL, the field and what to do."""


@dataclass
class _Operation:
    method: str
    path: str
    spec: dict[str, Any]
    where: str
    name: str = ""
    parameters: list[dict[str, Any]] = field(default_factory=list)
    body: dict[str, Any] | None = None
    response: Any = None
    example: Any = None
    todos: list[str] = field(default_factory=list)
    fields: list[tuple[str, str, str, dict[str, Any], list[Any], set[str]]] = field(default_factory=list)


def read_description(source: str) -> tuple[dict[str, Any], str]:
    """The OpenAPI description at ``source`` (a path, or an http(s) URL) as plain data, and the text
    that names it in messages.

    Raises:
        OpenAPIDraftError: unreadable, unreachable, over :data:`MAX_SPEC_BYTES`, not JSON or YAML,
            not a mapping, or without an ``openapi: 3.x`` / ``swagger: "2.0"`` field.
    """
    if re.match(r"https?://", source, flags=re.IGNORECASE):
        data = _fetch(source)
    else:
        path = Path(source)
        try:
            size = path.stat().st_size
            if size > MAX_SPEC_BYTES:
                raise OpenAPIDraftError(
                    f"{source}: the description is {size / 1e6:.1f} MB; toolpath drafts from at most {MAX_SPEC_BYTES / 1e6:.0f} MB (split the API by tag first)"
                )
            data = path.read_bytes()
        except OSError as error:
            raise OpenAPIDraftError(f"{source}: cannot read the description: {error.strerror or error}") from None
    return parse_description(data, source), source


def _fetch(url: str) -> bytes:
    import httpx2  # only a URL needs the HTTP client

    try:
        with httpx2.Client(timeout=FETCH_TIMEOUT_SECONDS, follow_redirects=True) as client, client.stream("GET", url) as response:
            if response.status_code != 200:
                raise OpenAPIDraftError(f"{url}: the server answered {response.status_code} {response.reason_phrase}; check the URL")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_SPEC_BYTES:
                    raise OpenAPIDraftError(
                        f"{url}: the description is over {MAX_SPEC_BYTES / 1e6:.0f} MB; toolpath drafts from at most that (split the API by tag first)"
                    )
            return bytes(body)
    except httpx2.HTTPError as error:
        raise OpenAPIDraftError(
            f"{url}: cannot fetch the description ({type(error).__name__}: {error}); check the URL and the network, or save the file and pass its path"
        ) from None


def parse_description(data: bytes | str, source: str) -> dict[str, Any]:
    """``data`` (JSON or YAML) as an OpenAPI description; ``source`` names it in messages.

    Raises:
        OpenAPIDraftError: see :func:`read_description`.
    """
    if isinstance(data, bytes):
        if len(data) > MAX_SPEC_BYTES:
            raise OpenAPIDraftError(f"{source}: the description is {len(data) / 1e6:.1f} MB; toolpath drafts from at most {MAX_SPEC_BYTES / 1e6:.0f} MB")
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise OpenAPIDraftError(f"{source}: not a text file (byte {error.start} is not UTF-8); give an OpenAPI description in JSON or YAML") from None
    try:
        # JSON is YAML, but the JSON parser is ten times faster on a large description.
        document = json.loads(data) if data.lstrip().startswith("{") else yaml.safe_load(data)
    except json.JSONDecodeError as error:
        raise OpenAPIDraftError(f"{source}: line {error.lineno}: not valid JSON ({error.msg}); give an OpenAPI description in JSON or YAML") from None
    except RecursionError:
        raise OpenAPIDraftError(f"{source}: a value is nested too deeply to read; flatten it or split the description") from None
    except ValueError as error:  # a number with more digits than Python converts
        raise OpenAPIDraftError(f"{source}: not JSON Python can read ({error})") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise OpenAPIDraftError(
            f"{source}: {line}not valid YAML ({getattr(error, 'problem', None) or error}); give an OpenAPI description in JSON or YAML"
        ) from None
    if not isinstance(document, dict):
        raise OpenAPIDraftError(
            f"{source}: holds {type(document).__name__ if document is not None else 'nothing'}, not an OpenAPI description (a mapping with `openapi` and `paths`)"
        )
    version = str(document.get("openapi") or document.get("swagger") or "")
    if not (version.startswith("3.") or version == "2.0"):
        raise OpenAPIDraftError(f'{source}: no `openapi: 3.x` or `swagger: "2.0"` field; toolpath drafts from OpenAPI 3.0/3.1 and Swagger 2.0 descriptions')
    if not isinstance(document.get("paths"), dict) or not document["paths"]:
        raise OpenAPIDraftError(f"{source}: field `paths`: no operations to draft")
    return document


class _References:
    """``$ref`` lookups in one description, by the ``referencing`` library; a chain of references
    that returns to itself is refused."""

    def __init__(self, document: dict[str, Any], source: str):
        resource = Resource(contents=document, specification=DRAFT202012)
        self._resolver = Registry().with_resource(_ROOT, resource).resolver(base_uri=_ROOT)
        self.source = source

    def resolve(self, node: Any, where: str) -> Any:
        chain: list[str] = []
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            reference = node["$ref"]
            if reference in chain:
                raise OpenAPIDraftError(
                    f"{self.source}: {where}: the $ref loop {' → '.join([*chain, reference])} never reaches a schema; point one of them at a real schema"
                )
            if not reference.startswith("#"):
                raise OpenAPIDraftError(
                    f"{self.source}: {where}: $ref {reference!r} points outside the description; bundle it into one file first (e.g. `redocly bundle`)"
                )
            chain.append(reference)
            try:
                node = self._resolver.lookup(reference).contents
            except (Unresolvable, LookupError, TypeError, ValueError):  # also a pointer stepping into a scalar, or a word into a list
                raise OpenAPIDraftError(f"{self.source}: {where}: $ref {reference!r} names nothing in the description") from None
        return node


def snake_case(text: str) -> str:
    """``GetMovieCredits`` → ``get_movie_credits``; ``GET_movie-movie_id-credits`` → ``get_movie_movie_id_credits``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", text)
    return re.sub(r"_+", "_", python_identifier(spaced).lower()).strip("_") or "operation"


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def _words(name: str) -> str:
    return snake_case(name).replace("_", " ")


def _summary(spec: Mapping[str, Any]) -> str:
    return " ".join(str(spec.get("summary") or "").split())


def _literal_segments(path: str) -> list[str]:
    return [segment for segment in path.strip("/").split("/") if segment and not segment.startswith("{")]


def _identifier_resource(parameter: str, path: str) -> str | None:
    """The resource a path parameter identifies (``person_id`` → ``person``; ``/pets/{id}`` → ``pet``), or ``None``."""
    name = snake_case(parameter)
    if name.endswith("_id") and len(name) > 3:
        return name[:-3]
    if name == "id":
        segments = path.strip("/").split("/")
        before = segments[: segments.index("{" + parameter + "}")] if "{" + parameter + "}" in segments else []
        literals = [segment for segment in before if not segment.startswith("{")]
        return _singular(snake_case(literals[-1])) if literals else None
    return None


class OpenAPIDrafter:
    """Drafts one description; see the module docstring for the rules. Use :func:`draft_openapi_catalog`."""

    def __init__(self, document: dict[str, Any], source: str, domain: str | None = None, api_name: str | None = None):
        self.document, self.source = document, source
        self.references = _References(document, source)
        self.visits_left = MAX_SCHEMA_VISITS  # of the response or request body being read (MAX_SCHEMA_VISITS)
        self.swagger = str(document.get("swagger", "")) == "2.0"
        title = (document.get("info") or {}).get("title") if isinstance(document.get("info"), dict) else None
        self.api = api_name or snake_case(domain or str(title or Path(source).stem or "api"))[:40]
        self.domain = domain or self.api
        self.notes: list[str] = []
        self.shared_summaries: set[str] = set()  # lower-cased summaries of more than one operation (set by draft)
        self.operations = self._operations()
        self.resources = self._resources()
        self.shapes = self._resource_shapes()

    # -- reading the description -------------------------------------------------------------

    def _mapping(self, value: Any, where: str) -> dict[Any, Any]:
        """``value``, an object of the description (``{}`` when absent or empty, as ``[]`` or ``""``).

        Raises:
            OpenAPIDraftError: ``value`` is there but no object (a list where OpenAPI has ``responses: {...}``).
        """
        if not value:
            return {}
        if not isinstance(value, dict):
            raise OpenAPIDraftError(f"{self.source}: {where} must be an object, not {type(value).__name__}; correct the description")
        return value

    def _list(self, value: Any, where: str) -> list[Any]:
        """``value``, a list of the description (``[]`` when absent or empty, as ``{}`` or ``""``).

        Raises:
            OpenAPIDraftError: ``value`` is there but no list (an object where OpenAPI has ``allOf: [...]``).
        """
        if not value:
            return []
        if not isinstance(value, list):
            raise OpenAPIDraftError(f"{self.source}: {where} must be a list, not {type(value).__name__}; correct the description")
        return value

    def _operations(self) -> list[_Operation]:
        operations: list[_Operation] = []
        names: dict[str, _Operation] = {}
        missing_ids = 0
        for path, item in self.document["paths"].items():
            item = self.references.resolve(item, f"paths.{path}")
            if not isinstance(item, dict):
                continue
            shared = self._list(item.get("parameters"), f"paths.{path}.parameters")
            for method in _METHODS:
                spec = item.get(method)
                if not isinstance(spec, dict):
                    continue
                where = f"paths.{path}.{method}"
                operation = _Operation(method, path, spec, where)
                identifier = spec.get("operationId")
                if isinstance(identifier, str) and identifier.strip():
                    operation.name = snake_case(identifier)
                else:
                    missing_ids += 1
                    operation.name = snake_case(
                        "_".join([method, *_literal_segments(path)]) + ("_by_" + "_".join(re.findall(r"\{(\w+)\}", path)) if "{" in path else "")
                    )
                    operation.todos.append(f"no operationId: named from `{method.upper()} {path}`; rename it")
                if operation.name in names:
                    other = names[operation.name]
                    raise OpenAPIDraftError(
                        f"{self.source}: {where} and {other.where} both become the tool name {operation.name!r}; "
                        "give them distinct operationIds (names are made snake-case identifiers, so `get-pet` and `get_pet` meet)"
                    )
                names[operation.name] = operation
                self._read_parameters(operation, [*shared, *self._list(spec.get("parameters"), f"{where}.parameters")])
                self._read_response(operation)
                operations.append(operation)
        if missing_ids:
            self.notes.append(f"{missing_ids} operation{'s have' if missing_ids != 1 else ' has'} no operationId: named from method and path (see each TODO)")
        return operations

    def _read_parameters(self, operation: _Operation, listed: list[Any]) -> None:
        by_key: dict[tuple[str, str], dict[str, Any]] = {}
        for index, parameter in enumerate(listed):
            parameter = self.references.resolve(parameter, f"{operation.where}.parameters[{index}]")
            if isinstance(parameter, dict) and isinstance(parameter.get("name"), str):
                by_key[(parameter["name"], str(parameter.get("in")))] = parameter  # the operation's own wins over the path's
        for (name, place), parameter in by_key.items():
            if place == "body":  # Swagger 2.0: the JSON body's schema
                operation.body = self.references.resolve(parameter.get("schema") or {}, f"{operation.where}.parameters.{name}.schema")
                continue
            if place == "formData":
                operation.todos.append(f"form field `{name}` is sent as a JSON body field here; check the API accepts JSON")
                place = "body"
            if place not in ("path", "query", "header", "body"):
                operation.todos.append(f"parameter `{name}` in {place} is left out (only path, query, header and body parameters are sent)")
                continue
            schema = self.references.resolve(parameter.get("schema") or parameter, f"{operation.where}.parameters.{name}.schema")
            operation.parameters.append(
                {
                    "name": name,
                    "in": place,
                    "required": bool(parameter.get("required")) or place == "path",
                    "schema": schema,
                    "description": parameter.get("description"),
                }
            )
        request = operation.spec.get("requestBody")
        if request is not None:
            request = self.references.resolve(request, f"{operation.where}.requestBody")
            content = self._mapping(request.get("content"), f"{operation.where}.requestBody.content") if isinstance(request, dict) else {}
            media = next((value for key, value in content.items() if "json" in key), None)
            if media is None and content:
                operation.todos.append(f"the request body is {', '.join(content)}, not JSON; its parameters are not drafted")
            elif isinstance(media, dict):
                operation.body = self.references.resolve(media.get("schema") or {}, f"{operation.where}.requestBody.schema")
        if operation.body is not None:
            self.visits_left = MAX_SCHEMA_VISITS
            properties, required = self._properties(operation.body, f"{operation.where}.requestBody.schema", [])
            if not properties:
                operation.todos.append("the request body is not an object with properties; pass it yourself")
            for name, schema in properties.items():
                operation.parameters.append(
                    {"name": name, "in": "body", "required": name in required, "schema": schema, "description": schema.get("description")}
                )

    def _read_response(self, operation: _Operation) -> None:
        responses = self._mapping(operation.spec.get("responses"), f"{operation.where}.responses")
        codes = sorted((str(code) for code in responses if str(code).startswith("2")), key=lambda code: (code != "200", code))
        if not codes:
            return
        where = f"{operation.where}.responses.{codes[0]}"
        response = self.references.resolve(responses[codes[0]] if codes[0] in responses else responses[int(codes[0])], where)
        if not isinstance(response, dict):
            return
        if self.swagger:
            operation.response = self.references.resolve(response.get("schema"), f"{where}.schema")
            examples = response.get("examples") or {}
            operation.example = next((value for key, value in examples.items() if "json" in key), None) if isinstance(examples, dict) else None
            return
        content = self._mapping(response.get("content"), f"{where}.content")
        media = next((value for key, value in content.items() if "json" in key), None)
        if not isinstance(media, dict):
            return
        operation.response = self.references.resolve(media.get("schema"), f"{where}.schema")
        example = media.get("example")
        if example is None and isinstance(media.get("examples"), dict) and media["examples"]:
            first = self.references.resolve(next(iter(media["examples"].values())), f"{where}.examples")
            example = first.get("value") if isinstance(first, dict) else None
        operation.example = example

    def _properties(self, schema: Any, where: str, stack: list[int]) -> tuple[dict[str, Any], set[str]]:
        """The properties of an object schema (``allOf`` merged; ``anyOf``/``oneOf`` alternatives pooled), resolved, and its required names."""
        schema = self.references.resolve(schema, where)
        self.visits_left -= 1
        if not isinstance(schema, dict) or id(schema) in stack or self.visits_left < 0:
            return {}, set()
        properties: dict[str, Any] = {}
        required = {name for name in schema.get("required") or [] if isinstance(name, str)} if isinstance(schema.get("required"), list) else set()
        for name, value in (schema.get("properties") or {}).items() if isinstance(schema.get("properties"), dict) else ():
            properties[str(name)] = self.references.resolve(value, f"{where}.properties.{name}") or {}
        for keyword in ("allOf", "anyOf", "oneOf"):
            for index, part in enumerate(self._list(schema.get(keyword), f"{where}.{keyword}")):
                more, more_required = self._properties(part, f"{where}.{keyword}[{index}]", [*stack, id(schema)])
                for name, value in more.items():
                    properties.setdefault(name, value)
                if keyword == "allOf":
                    required |= more_required
        return {name: value if isinstance(value, dict) else {} for name, value in properties.items()}, required

    def _fields(self, schema: Any, example: Any, where: str) -> Iterator[tuple[str, str, str, dict[str, Any], list[Any], set[str]]]:
        """Every field of a response, depth first: ``(path, container, name, schema, example values,
        sibling names)``; ``path`` as an output path (``cast[0].id``), ``container`` the key of the
        object's property (``cast``; ``""`` at the top)."""

        def walk(node: Any, examples: list[Any], path: str, container: str, depth: int, stack: tuple[int, ...]) -> Iterator:
            node = self.references.resolve(node, where)
            self.visits_left -= 1
            if not isinstance(node, dict) or depth > MAX_SCHEMA_DEPTH or id(node) in stack or self.visits_left < 0:
                return
            if self._of_several_kinds(node, where):
                return  # "one of a movie or a show": which kind an item is, and so what its id is, only the data says
            properties, _ = self._properties(node, where, list(stack))
            properties.pop("", None)  # a field with no name (TMDB's trending schema) has no output path
            stack = (*stack, id(node))
            # A list the example gives where the schema says nothing (TMDB's trending) is read from the example.
            if node.get("type") == "array" or "items" in node or (not node and any(isinstance(value, list) for value in examples)):
                items = [item for value in examples if isinstance(value, list) for item in value[:200]]
                yield from walk(node.get("items", {}), items, f"{path}[0]", container, depth + 1, stack)
                return
            objects = [value for value in examples if isinstance(value, dict)]
            for value in objects:  # an example names fields a schema may leave out (TMDB's trending)
                for name in value:
                    properties.setdefault(str(name), {})
            siblings = set(properties)
            for name, child in properties.items():
                child_path = f"{path}.{name}" if path else name
                values = [value[name] for value in objects if name in value]
                yield child_path, container, name, child, values, siblings
                yield from walk(child, values, child_path, name, depth + 1, stack)

        self.visits_left = MAX_SCHEMA_VISITS
        yield from walk(schema, [example] if example is not None else [], "", "", 0, ())

    def _of_several_kinds(self, schema: dict[str, Any], where: str) -> bool:
        """Whether ``schema`` is one of several object shapes (``oneOf``/``anyOf`` of two or more objects
        with fields, and no fields of its own): a ``known_for`` list of movies and shows. A nullable
        wrapper (``anyOf: [X, {type: null}]``) is one shape."""
        if schema.get("properties"):
            return False
        for keyword in ("oneOf", "anyOf"):
            alternatives = [self.references.resolve(part, where) for part in self._list(schema.get(keyword), f"{where}.{keyword}")]
            if sum(1 for part in alternatives if isinstance(part, dict) and (part.get("properties") or part.get("allOf"))) > 1:
                return True
        return False

    # -- resources ------------------------------------------------------------------------------

    def _resources(self) -> dict[str, str]:
        """``{resource: state token}`` of every identifier a path parameter takes."""
        resources: dict[str, str] = {}
        for operation in self.operations:
            for parameter in operation.parameters:
                if parameter["in"] == "path" and (resource := _identifier_resource(parameter["name"], operation.path)):
                    resources[resource] = f"{self.domain}.{resource}_id"
        return resources

    def _resource_shapes(self) -> dict[str, set[str]]:
        """``{resource: field names}`` of each resource's own ``GET .../{its id}`` response."""
        shapes: dict[str, set[str]] = {}
        for operation in self.operations:
            last = operation.path.rstrip("/").rsplit("/", 1)[-1]
            if operation.method != "get" or not last.startswith("{"):
                continue
            resource = _identifier_resource(last.strip("{}"), operation.path)
            if resource in self.resources:
                fields = {
                    name for path, _, name, *_ in self._fields(operation.response, operation.example, operation.where) if "." not in path and "[" not in path
                }
                shapes.setdefault(resource, set()).update(fields - {"id"})
        return shapes

    def _object_resource(self, operation: _Operation, container: str, siblings: set[str]) -> str | None:
        """The resource an object with an ``id`` field is (see the module docstring: name, shape, path).
        The top-level object of an operation on an identified resource (``/movie/{movie_id}/credits``)
        is that resource: its ``id`` echoes the one the path took."""
        identified = [
            resource for name in re.findall(r"\{(\w+)\}", operation.path) if (resource := _identifier_resource(name, operation.path)) in self.resources
        ]
        if not container and identified and siblings is self._top_level_siblings(operation):
            return identified[-1]
        if container:
            named = _singular(snake_case(container))
            matches = [resource for resource in self.resources if named == resource or named.endswith("_" + resource)]
            if matches:
                return max(matches, key=len)
        own = siblings - {"id"}
        if own:
            shares = {resource: len(own & shape) / len(own) for resource, shape in self.shapes.items()}
            ranked = sorted(shares.items(), key=lambda pair: pair[1], reverse=True)
            if ranked and ranked[0][1] >= SHAPE_MIN_SHARE and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
                return ranked[0][0]
        if container in ("", "results", "items", "data"):
            for segment in reversed(_literal_segments(operation.path)):
                for word in reversed(snake_case(segment).split("_")):
                    if _singular(word) in self.resources:
                        return _singular(word)
        return None

    # -- the catalog ----------------------------------------------------------------------------

    def draft(self) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """The catalog document and ``{tool name: TODO notes}``."""
        field_counts = Counter()
        for operation in self.operations:
            operation.fields = list(self._fields(operation.response, operation.example, operation.where))
            if self.visits_left < 0:
                operation.todos.append(
                    f"the response schema nests shared parts past {MAX_SCHEMA_VISITS:,} schemas; only the fields read before that are drafted: check its outputs"
                )
            field_counts.update({name for _, _, name, *_ in operation.fields})
        distinctive = max(2, int(DISTINCTIVE_SHARE * len(self.operations)))  # in a small API, two operations sharing a field still tell it apart
        self.shared_summaries = {
            summary for summary, count in Counter(_summary(operation.spec).lower() for operation in self.operations).items() if summary and count > 1
        }
        states: dict[str, dict[str, Any]] = {}
        for resource, token in sorted(self.resources.items()):
            words = resource.replace("_", " ")
            states[token] = {"token": token, "description": f"The id of a {words} is known.", "affordances": [f"find the {words}", f"{words} id"]}
        tools = []
        for operation in self.operations:
            tools.append(self._tool(operation, operation.fields, field_counts, distinctive, states))
        document: dict[str, Any] = {
            "domain": self.domain,
            "package": f"{self.domain}_api",
            "http_apis": {self.api: self._api()},
            "states": list(states.values()),
            "tools": tools,
        }
        return document, {operation.name: operation.todos for operation in self.operations if operation.todos}

    def _api(self) -> dict[str, Any]:
        api: dict[str, Any] = {"base_url": self._base_url()}
        auth = self._auth()
        if auth:
            api["auth"] = auth
        api.update({"timeout_seconds": 30, "retries": 3, "max_response_bytes": MAX_SPEC_BYTES})
        return api

    def _base_url(self) -> str:
        if self.swagger:
            host = self.document.get("host")
            if not host:
                self.notes.append("no `host`: set http_apis base_url to where the API is served")
                return "${" + self.api.upper() + "_BASE_URL}"
            scheme = next(iter(self._list(self.document.get("schemes"), "schemes")), "https")
            return f"{scheme}://{host}{self.document.get('basePath') or ''}".rstrip("/")
        servers = self._list(self.document.get("servers"), "servers")
        url = servers[0].get("url") if servers and isinstance(servers[0], dict) else None
        if not url or not re.match(r"https?://", str(url)):
            self.notes.append(f"servers gives {'no URL' if not url else repr(url)}: set http_apis base_url to the API's absolute URL")
            return "${" + self.api.upper() + "_BASE_URL}"
        for name, variable in self._mapping(servers[0].get("variables"), "servers[0].variables").items():
            url = url.replace("{" + str(name) + "}", str(self._mapping(variable, f"servers[0].variables.{name}").get("default", "")))
        return str(url).rstrip("/")

    def _auth(self) -> dict[str, Any] | None:
        schemes = (
            self.document.get("securityDefinitions") if self.swagger else self._mapping(self.document.get("components"), "components").get("securitySchemes")
        )
        if not isinstance(schemes, dict) or not schemes:
            return None
        name, scheme = next(iter(schemes.items()))
        scheme = self.references.resolve(scheme, f"securitySchemes.{name}")
        if len(schemes) > 1:
            self.notes.append(f"the description offers {len(schemes)} security schemes ({', '.join(schemes)}); the first, {name}, is drafted")
        kind = str(scheme.get("type", "")).lower() if isinstance(scheme, dict) else ""
        variable = f"{self.api.upper()}_API_KEY" if kind == "apikey" else f"{self.api.upper()}_TOKEN"
        if kind == "apikey" and scheme.get("in") in ("header", "query"):
            return {"scheme": "api_key", "env": variable, "in": scheme["in"], "name": scheme.get("name", name)}
        if (kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer") or kind in ("oauth2", "openidconnect"):
            if kind != "http":
                self.notes.append(f"security scheme {name} is {kind}: drafted as a bearer token read from {variable}; obtain the token yourself")
            return {"scheme": "bearer", "env": variable}
        if (kind == "http" and str(scheme.get("scheme", "")).lower() == "basic") or kind == "basic":
            return {"scheme": "basic", "env": f"{self.api.upper()}_CREDENTIALS"}
        self.notes.append(f"security scheme {name} ({kind or 'no type'}) is not drafted; add `auth` to http_apis yourself")
        return None

    def _tool(self, operation: _Operation, fields: list, field_counts: Counter, distinctive: int, states: dict[str, dict[str, Any]]) -> dict[str, Any]:
        spec = operation.spec
        summary = _summary(spec)
        description = " ".join(str(spec.get("description") or "").split())
        first_sentence = re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", re.split(r"(?<=[.!?])\s", description, maxsplit=1)[0]) if description else ""
        requires: dict[str, str] = {}
        required_parameters, optional_parameters = [], []
        http: dict[str, Any] = {"api": self.api, "method": operation.method.upper(), "path": operation.path}
        places: dict[str, list[str]] = {"query": [], "headers": [], "body": []}
        for parameter in operation.parameters:
            name = parameter["name"]
            if not _PARAMETER_NAME.fullmatch(name):
                operation.todos.append(f"parameter {name!r} is left out: its name cannot be a parameter name; add it under another name")
                continue
            entry: dict[str, Any] = {"name": name, "type": type_from_json_schema(parameter["schema"])}
            if parameter["description"]:
                entry["description"] = " ".join(str(parameter["description"]).split())
            resource = _identifier_resource(name, operation.path) if parameter["in"] == "path" else None
            if resource in self.resources:
                entry["state"] = requires[name] = self.resources[resource]
            elif parameter["in"] == "path":
                carriers = [
                    other.name for other in self.operations if other is not operation and any(field_name == name for _, _, field_name, *_ in other.fields)
                ]
                if carriers:
                    operation.todos.append(
                        f"path parameter `{name}` is drafted as a value the user gives; {', '.join(carriers[:3])} also return a field `{name}`: make it a state if it should flow"
                    )
            if parameter["in"] != "path":
                places["headers" if parameter["in"] == "header" else parameter["in"]].append(name)
            if parameter["required"]:
                required_parameters.append(entry)
            else:
                if isinstance(parameter["schema"], dict) and "default" in parameter["schema"]:
                    entry["default"] = parameter["schema"]["default"]
                optional_parameters.append(entry)
        http.update({place: names for place, names in places.items() if names})
        outputs: dict[str, str] = {}
        for path, container, name, _, _, siblings in fields:
            if name == "id":
                resource = self._object_resource(operation, container, siblings)
            elif snake_case(name).endswith("_id"):
                resource = snake_case(name)[:-3] if snake_case(name)[:-3] in self.resources else None
            else:
                continue
            if resource is None:
                continue
            token = self.resources[resource]
            if token in requires.values():
                continue
            if token in outputs:
                if not any(f"`{token}`" in todo for todo in operation.todos):
                    operation.todos.append(f"`{token}` is also at `{path}` (and maybe further); the first, `{outputs[token]}`, is drafted")
                continue
            outputs[token] = path
        own = self._result_token(operation, states)
        resource_words = self._subject_words(operation)
        # A summary several operations share ("Get Details") tells none of them apart: the description keeps it.
        telling = [text for text in (summary if summary.lower() not in self.shared_summaries else "", first_sentence) if text]
        affordances = list(telling)
        if self._copied_resource(operation) is None:
            affordances += self._field_phrases(fields, field_counts, distinctive, resource_words)
        states[own] = {
            "token": own,
            "description": f"The response of {operation.method.upper()} {operation.path}" + (f": {first_sentence}" if first_sentence else "."),
            "affordances": list(dict.fromkeys(affordances)) or [own.split(".", 1)[1].replace("_", " ")],
        }
        tool: dict[str, Any] = {"name": operation.name}
        tool["description"] = tool_description(summary, first_sentence, operation.method.upper(), operation.path)
        tool["http"] = http
        if required_parameters:
            tool["required_parameters"] = required_parameters
        if optional_parameters:
            tool["optional_parameters"] = optional_parameters
        tool["return_spec"] = {
            "name": f"{own.split('.', 1)[1]}",
            "type": type_from_json_schema(operation.response) if operation.response else "Any",
            "state": own,
        }
        if outputs:
            tool["outputs"] = outputs
        tool["state_transition"] = {"requires": sorted(set(requires.values())), "produces": sorted({*outputs, own})}
        lookups = self._lookup_phrases(operation, outputs)
        tool["affordances"] = list(dict.fromkeys([_words(operation.name), *telling, *lookups]))
        if operation.method in _EFFECT_METHODS:
            tool["approval"] = "always"
        if operation.response is None and operation.method == "get":
            operation.todos.append("the success response has no JSON schema: its fields and the ids it may give are unknown")
        return tool

    def _lookup_phrases(self, operation: _Operation, outputs: Mapping[str, str]) -> list[str]:
        """How a person asks for an operation that finds resources from their words: one that takes a
        required text in the query string and gives a resource's id (``GET /search/movie?query=`` →
        ``find a movie by its name``). People name what they want ("the movie Inception"); the id
        that other operations need comes from such a lookup."""
        texts = [
            parameter["name"]
            for parameter in operation.parameters
            if parameter["in"] == "query" and parameter["required"] and isinstance(parameter["schema"], dict) and parameter["schema"].get("type") == "string"
        ]
        if not texts or operation.method != "get":
            return []
        named = {_singular(snake_case(text)) for text in texts} - _FREE_TEXT_PARAMETERS
        by = _words(sorted(named)[0]) if named else "name"
        phrases = []
        for resource, token in self.resources.items():
            if token in outputs:
                words = resource.replace("_", " ")
                phrases += [f"find a {words} by its {by}", f"look up a {words} by {by}"]
        return phrases

    def _copied_resource(self, operation: _Operation) -> str | None:
        """The resource whose own ``GET .../{its id}`` response an operation not on that id returns
        (``GET /movie/latest`` gives one movie as ``GET /movie/{movie_id}`` does), else ``None``: at
        least :data:`COPY_MIN_SHARE` of its top-level fields, and at least :data:`COPY_MIN_FIELDS`, are
        that resource's. Its fields are that
        resource's, already phrased on the resource's own result: said again, "the budget of a movie"
        would as well take the latest movie."""
        if operation.method != "get" or operation.path.rstrip("/").endswith("}"):
            return None
        own = (self._top_level_siblings(operation) or set()) - {"id"}
        shares = {resource: len(own & shape) / len(own) for resource, shape in self.shapes.items() if own}
        best = max(shares, key=shares.__getitem__, default=None)
        return best if best is not None and shares[best] >= COPY_MIN_SHARE and len(own) >= COPY_MIN_FIELDS else None

    def _top_level_siblings(self, operation: _Operation) -> set[str] | None:
        return next((siblings for path, _, _, _, _, siblings in operation.fields if "." not in path and "[" not in path), None)

    def _subject_words(self, operation: _Operation) -> str:
        """What an operation's response is about, in words: the last literal segment followed by a
        parameter (``/tv/{tv_id}/season/{season_number}`` → season), else the last literal segment."""
        segments = operation.path.strip("/").split("/")
        followed = [segment for segment, after in zip(segments, segments[1:]) if not segment.startswith("{") and after.startswith("{")]
        literals = followed or _literal_segments(operation.path) or [operation.name]
        return _singular(snake_case(literals[-1])).replace("_", " ")

    def _result_token(self, operation: _Operation, states: Mapping[str, Any]) -> str:
        literals = [snake_case(segment) for segment in _literal_segments(operation.path)] or [operation.name]
        if operation.path.rstrip("/").endswith("}") and operation.method == "get":
            literals[-1] = _singular(literals[-1]) + "_details"  # /books/{book_id} → book_details
        base = "_".join(literals)
        suffix = {"post": "_created", "put": "_updated", "patch": "_updated", "delete": "_deleted"}.get(operation.method, "")
        if operation.method in ("head", "options", "trace"):
            suffix = f"_{operation.method}"
        token = f"{self.domain}.{base}{suffix}"
        return token if token not in states else f"{self.domain}.{operation.name}"

    def _field_phrases(self, fields: list, field_counts: Counter, distinctive: int, subject: str) -> list[str]:
        """Short phrases for an operation's distinctive response fields (see the module docstring)."""
        phrases: list[str] = []
        for path, container, name, schema, _, _ in fields:
            if path.count(".") > 1 or not name.strip("_") or name == "id" or snake_case(name).endswith("_id") or field_counts[name] > distinctive:
                continue
            words = _words(name)
            owner = _words(container) if container else subject
            phrases.append(f"{owner} {words}" if owner and owner not in words else words)
            text = " ".join(str(schema.get("description") or "").split()) if isinstance(schema, dict) else ""
            if text and len(text) <= 120:
                phrases.append(text)
        return phrases


def tool_description(summary: str, first_sentence: str, method: str, path: str) -> str:
    """A drafted tool's description: what the operation says it does, then its method and path.

    ``summary`` and ``first_sentence`` (of its description) are joined by `` — `` when both say
    something, the second left out when it only repeats the first (case and closing punctuation
    aside); a text with no letter or digit says nothing. ``Search people — Finds people by name.
    (GET /search/person)``, ``Search people (GET /search/person)``; an operation that says nothing
    is described by its method and path alone: ``GET /search/person``.
    """
    said: list[str] = []
    for text in (summary.strip(), first_sentence.strip()):
        if any(character.isalnum() for character in text) and _gist(text) not in {_gist(earlier) for earlier in said}:
            said.append(text)
    operation = f"{method} {path}"
    return f"{' — '.join(said)} ({operation})" if said else operation


def _gist(text: str) -> str:
    return text.rstrip(".!?:;, ").casefold()


def draft_openapi_catalog(source: str, domain: str | None = None, api_name: str | None = None) -> tuple[dict[str, Any], dict[str, list[str]], list[str]]:
    """Draft the catalog of the description at ``source`` (a path or an http(s) URL).

    Returns:
        ``(document, todos, notes)``: the catalog as plain data (``domain``, ``package``,
        ``http_apis``, ``states``, ``tools``), ``{tool name: [what the author should check]}``
        and catalog-wide notes.

    Raises:
        OpenAPIDraftError: the description cannot be read or drafted (the message names the file or
            URL, the field and what to do).
    """
    document, shown = read_description(source)
    return draft_from_document(document, shown, domain, api_name)


def draft_from_document(
    document: dict[str, Any], source: str, domain: str | None = None, api_name: str | None = None
) -> tuple[dict[str, Any], dict[str, list[str]], list[str]]:
    """:func:`draft_openapi_catalog` of a description already parsed (``source`` names it in messages)."""
    try:
        drafter = OpenAPIDrafter(document, source, domain, api_name)
        catalog, todos = drafter.draft()
    except RecursionError:  # a schema nested past Python's stack inside a single value
        raise OpenAPIDraftError(f"{source}: a schema is nested too deeply to read; flatten it or split the description") from None
    return catalog, todos, drafter.notes


def render_catalog(document: Mapping[str, Any], todos: Mapping[str, list[str]], notes: list[str], source: str, date: str) -> str:
    """The drafted catalog as YAML: a header saying where it came from and what is left to review,
    and each tool's TODOs as ``# TODO:`` comments above it."""
    tools = list(document["tools"])
    header = [
        f"# Drafted by `toolpath catalog draft --openapi` on {date} from {_one_line(source)} ({len(tools)} operation{'s' if len(tools) != 1 else ''}).",
        "# Review: the states (identifiers from path parameters and the responses that hold them), each tool's",
        "# outputs (where an id is in the response), the affordances, and every TODO below; then `toolpath validate`.",
    ]
    header += [f"# TODO: {_one_line(note)}" for note in notes]
    top = {key: value for key, value in document.items() if key != "tools"}
    text = "\n".join(header) + "\n" + yaml.safe_dump(top, sort_keys=False, allow_unicode=True, width=120) + "tools:\n"
    for tool in tools:
        for todo in todos.get(tool["name"], []):
            text += f"# TODO: {tool['name']}: {_one_line(todo)}\n"
        text += yaml.safe_dump([tool], sort_keys=False, allow_unicode=True, width=120)
    return text


def _one_line(text: str) -> str:
    """``text`` for a comment line: every character that is not printable written as its Python
    escape. A TODO quotes the description's own names (paths, security schemes, media types), and a
    line break in one (YAML 1.1 also breaks lines at U+0085, U+2028 and U+2029) would end the comment
    and write the rest into the catalog as entries of its own."""
    return "".join(character if character.isprintable() else character.encode("unicode_escape").decode("ascii") for character in text)
