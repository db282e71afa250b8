"""Catalogs of HTTP tools (issue 54): the `http_apis` section, a tool's `http` block and `outputs`,
as the loader, the linter and the JSON Schema see them."""

import textwrap

import jsonschema
import pytest
import yaml

from toolpath.registry import CatalogError, ToolDefinition, lint_catalogs, read_catalog
from toolpath.registry.catalog_format import catalog_json_schema
from toolpath.registry.http_apis import HttpApiConfig
from toolpath.registry.output_paths import parse_output_path

MOVIES = """\
domain: movies
package: movie_api
http_apis:
  films:
    base_url: "${FILMS_URL}/v3"
    auth: {scheme: api_key, env: FILMS_KEY, in: query, name: api_key}
    retries: 2
states:
  - {token: movies.person_id, description: "The id of a person in the film database."}
  - {token: movies.people_found, description: "People whose names match a search."}
  - {token: movies.film_id, description: "The id of a film."}
  - {token: movies.filmography, description: "The films a person worked on, as cast and crew."}
tools:
  - name: find_person
    description: "Find people by name (GET /search/person)"
    http:
      api: films
      method: GET
      path: /search/person
      query: [query, page]
    required_parameters: [{name: query, type: str}]
    optional_parameters: [{name: page, type: int, default: 1}]
    outputs:
      movies.person_id: "results[0].id"
    state_transition: {requires: [], produces: [movies.person_id, movies.people_found]}
  - name: filmography
    description: "The films of a person (GET /person/{person_id}/movie_credits)"
    http: {api: films, method: GET, path: "/person/{person_id}/movie_credits"}
    required_parameters: [{name: person_id, type: int, state: movies.person_id}]
    outputs: {movies.film_id: "cast[0].id"}
    state_transition: {requires: [movies.person_id], produces: [movies.film_id, movies.filmography]}
"""


def write(directory, text, name="movies.yaml"):
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def problems_of(path):
    with pytest.raises(CatalogError) as caught:
        read_catalog(path)
    return [(problem.code, problem.field, problem.line, problem.message) for problem in caught.value.problems]


def test_http_tools_load_with_their_api_resolved_and_run_on_the_host(tmp_path):
    catalog = read_catalog(write(tmp_path, MOVIES))
    find, credits = catalog.tools
    assert set(catalog.http_apis) == {"films"}
    assert find.binding == "host" and find.module is None
    assert isinstance(find.http.api, HttpApiConfig) and find.http.api.name == "films" and find.http.api.retries == 2
    assert find.http.api.auth.placement == "query" and find.http.api.auth.name == "api_key"
    assert credits.http.method == "GET" and credits.http.path_parameters == ["person_id"]
    assert find.outputs == {"movies.person_id": "results[0].id"}
    # A GET reads; it changes nothing outside the kernel.
    assert find.side_effect == "none"


def test_the_base_url_reads_the_environment_at_call_time(tmp_path):
    api = read_catalog(write(tmp_path, MOVIES)).http_apis["films"]
    assert api.expanded_base_url({"FILMS_URL": "http://127.0.0.1:9"}) == "http://127.0.0.1:9/v3"
    with pytest.raises(KeyError, match="FILMS_URL"):
        api.expanded_base_url({})
    with pytest.raises(ValueError, match="not an http"):
        api.expanded_base_url({"FILMS_URL": "file:///etc"})


def test_an_undeclared_api_is_named_with_its_line(tmp_path):
    text = MOVIES.replace("http: {api: films", "http: {api: flims")
    [(code, field, line, message)] = problems_of(write(tmp_path, text))
    assert code == "TP112" and field == "tools[1].http.api" and line == text.splitlines().index(next(row for row in text.splitlines() if "flims" in row)) + 1
    assert "'flims'" in message and "declared: films" in message


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        (("query: [query, page]", "query: [query, pages]"), "tools[0]", "sends 'pages'"),
        (("query: [query, page]", "query: [query]"), "tools[0]", "parameter 'page' is not sent"),
        (('"/person/{person_id}/movie_credits"', '"/person/{id}/movie_credits"'), "tools[1]", "sends 'id' (path)"),
        (('"results[0].id"', '"results[first].id"'), "tools[0].outputs.movies.person_id", "is not dotted keys"),
        (("outputs: {movies.film_id", "outputs: {movies.films_id"), "tools[1]", "'movies.films_id' is not a state the tool produces"),
        (("path: /search/person", "path: https://elsewhere.example/search"), "tools[0].http.path", "starts with '/'"),
        (("method: GET", "method: FETCH"), "tools[0].http.method", "Input should be"),
        (("retries: 2", "retries: '2'"), "http_apis.films.retries", "valid integer"),
        (("name: api_key}", "}"), "http_apis.films.auth", "needs `name`"),
        (("env: FILMS_KEY", "env: sk-live-123"), "http_apis.films.auth.env", "not an environment variable name"),
        (("  - name: filmography\n", "  - name: filmography\n    binding: kernel\n"), "tools[1]", "runs on the host"),
        (("  - name: filmography\n", "  - name: filmography\n    module: movie_api.credits\n"), "tools[1]", "is not imported"),
    ],
)
def test_a_wrong_http_tool_is_refused_naming_the_field(tmp_path, edit, field, words):
    path = write(tmp_path, MOVIES.replace(*edit))
    problems = problems_of(path)
    assert any(found_field == field and words in message for _, found_field, _, message in problems), problems
    assert all(line is not None for _, _, line, _ in problems)


def test_a_misspelt_http_field_gets_a_suggestion(tmp_path):
    path = write(tmp_path, MOVIES.replace("retries: 2", "retry: 2"))
    [(code, field, _, message)] = problems_of(path)
    assert code == "TP101" and field == "http_apis.films.retry" and "did you mean 'retries'" in message


def test_side_effects_follow_the_method_unless_effects_says(tmp_path):
    def tool(method, **extra):
        operation = {"api": HttpApiConfig(name="films", base_url="http://films.example"), "method": method, "path": "/lists"}
        return ToolDefinition(name="change_list", http=operation, **extra)

    assert [tool(method).side_effect for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")] == ["none", "none", "sends", "writes", "writes", "writes"]
    assert tool("POST", effects="none").side_effect == "none"
    with pytest.raises(ValueError, match="no body"):
        ToolDefinition(
            name="get_with_body", http={"api": "films", "method": "GET", "path": "/x", "body": ["q"]}, required_parameters=[{"name": "q", "type": "str"}]
        )


def test_output_paths():
    assert parse_output_path("results[0].id") == ("results", 0, "id")
    assert parse_output_path("crew[2].name") == ("crew", 2, "name")
    assert parse_output_path("[1]") == (1,)
    for wrong in ("", "results..id", "results[-1]", ".id", "id.", "results[0]id"):
        with pytest.raises(ValueError, match="not dotted keys"):
            parse_output_path(wrong)


def test_lint_knows_outputs_pass_values_on(tmp_path):
    """An HTTP tool whose produced state a later tool takes has an output path for it: no TP009."""
    findings = lint_catalogs([write(tmp_path, MOVIES)])
    assert [finding.code for finding in findings if finding.severity == "error"] == []
    assert not any(finding.code == "TP009" for finding in findings)
    without_output = MOVIES.replace('    outputs:\n      movies.person_id: "results[0].id"\n', "")
    findings = lint_catalogs([write(tmp_path, without_output, "bare.yaml")])
    assert any(finding.code == "TP009" and "find_person" in finding.message for finding in findings)


def test_the_json_schema_describes_http_catalogs(tmp_path):
    schema = catalog_json_schema()
    document = yaml.safe_load(MOVIES)
    jsonschema.validate(document, schema)
    document["http_apis"]["films"]["auth"]["in"] = "cookie"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema)


def test_output_value_follows_a_path_and_says_where_it_found_nothing():
    from toolpath.kernel.inside.http_results import HttpToolError, OutputPathError, output_value

    credits = {"id": 4, "cast": [{"id": 11, "title": "First"}, {"id": 12, "title": "Second"}], "crew": []}
    assert output_value(credits, "cast[1].id", "credits") == 12
    assert output_value([{"id": 3}], "[0].id", "listing") == 3
    with pytest.raises(OutputPathError, match=r"credits's result has 0 item\(s\) at crew, so output path 'crew\[0\].id' finds nothing"):
        output_value(credits, "crew[0].id", "credits")
    with pytest.raises(OutputPathError, match=r"no field 'name' at cast\[0\] \(its fields: id, title\)"):
        output_value(credits, "cast[0].name", "credits")
    with pytest.raises(OutputPathError, match="no list at id"):
        output_value(credits, "id[0]", "credits")
    with pytest.raises(OutputPathError, match=r"no fields at its top \(found null\)"):
        output_value(None, "id", "credits")
    # An OutputPathError is a LookupError; an HttpToolError rebuilt in the kernel from the host's message keeps its status.
    assert issubclass(OutputPathError, LookupError)
    assert HttpToolError("movie: GET /movie/1 answered 404 Not Found: gone").status == 404
    assert HttpToolError("movie: GET /movie/1 got no answer (ConnectError)").status is None
