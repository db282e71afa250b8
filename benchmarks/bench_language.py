"""How the language check (toolpath.planner.tasks.language) judges tasks: English ones must never be
refused; tasks in other languages should be.

English tasks: every request of benchmarks/requests_cases.yaml and benchmarks/dataflow_cases.yaml
(their steps too), and the requests and gold steps of the development data in ../shared/data
(UltraTool and TMDB of taskplan/, MetaTool's single- and multi-tool queries). Foreign tasks: the
hand-written ones below (French, German, Spanish, Italian, Portuguese, Dutch, Chinese, Japanese,
Korean, Russian), each asking for something the shipped catalogs do.

Prints one JSON object: per source, the tasks read, those judged (enough words) and those refused;
every English task refused is listed (the target is none). Run:

    .venv/bin/python benchmarks/bench_language.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from toolpath.planner.tasks.language import MIN_CONFIDENCE, MIN_WORDS, detect_language

HERE = Path(__file__).parent

FOREIGN = {
    "fr": [
        "charge le fichier ventes.csv et trace le chiffre d'affaires par mois",
        "combien de lignes y a-t-il dans ventes.xlsx ?",
        "trie le tableau par chiffre d'affaires décroissant",
        "est-ce que l'aspirine respecte la règle de cinq de Lipinski ?",
        "regroupe les ventes par région et calcule la somme du chiffre d'affaires",
        "affiche les premières lignes du fichier et décris chaque colonne",
    ],
    "de": [
        "lade die Datei umsatz.csv und zeichne den Umsatz pro Monat",
        "wie viele Zeilen hat die Tabelle in umsatz.xlsx?",
        "sortiere die Tabelle nach Umsatz absteigend",
        "berechne die Deskriptoren dieses Moleküls und prüfe die Lipinski-Regel",
        "gruppiere die Zeilen nach Region und summiere den Umsatz",
    ],
    "es": [
        "carga el archivo ventas.csv y dibuja los ingresos por mes",
        "¿cuántas filas hay en la tabla de ventas?",
        "ordena la tabla por ingresos de mayor a menor",
        "agrupa las filas por región y suma los ingresos de cada una",
        "comprueba si esta molécula cumple la regla de cinco de Lipinski",
    ],
    "it": ["carica il file vendite.csv e disegna il fatturato per mese", "quante righe ci sono nella tabella delle vendite?"],
    "pt": ["carregue o arquivo vendas.csv e desenhe a receita por mês", "quantas linhas existem na tabela de vendas?"],
    "nl": ["laad het bestand verkoop.csv en teken de omzet per maand", "hoeveel rijen staan er in de tabel met verkopen?"],
    "zh": [
        "加载 sales.csv 并按月绘制收入",
        "这个表格有多少行？",
        "按收入从高到低排序表格",
        "检查这个分子是否符合利平斯基五规则",
        "按地区分组并计算收入总和",
    ],
    "ja": [
        "sales.csv を読み込んで月ごとの売上をプロットして",
        "この表は何行ありますか？",
        "売上の降順で表を並べ替えてください",
        "この分子がリピンスキーの法則を満たすか確認して",
        "地域ごとにグループ化して売上を合計してください",
    ],
    "ko": ["sales.csv 파일을 불러와서 월별 매출을 그려 주세요", "이 표에는 몇 개의 행이 있나요?"],
    "ru": ["загрузи файл sales.csv и построй выручку по месяцам", "сколько строк в этой таблице продаж?"],
}


def _yaml_tasks(path: Path) -> Iterator[str]:
    for case in yaml.safe_load(path.read_text(encoding="utf-8")):
        for key in ("request", "task"):
            if isinstance(case.get(key), str):
                yield case[key]
        for step in case.get("steps") or ():
            if isinstance(step, str):
                yield step


def _taskplan(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                record = json.loads(line)
                yield record["user_request"]
                yield from record.get("task_steps", ())


def english_sources(data: Path) -> dict[str, list[str]]:
    """``{source: tasks}`` of every English task found (a missing data folder is skipped)."""
    sources = {"requests_cases": list(_yaml_tasks(HERE / "requests_cases.yaml")), "dataflow_cases": list(_yaml_tasks(HERE / "dataflow_cases.yaml"))}
    for name in ("ultratool", "tmdb"):
        path = data / "taskplan" / name / "data.json"
        if path.exists():
            sources[f"taskplan/{name}"] = list(_taskplan(path))
    queries = data / "metatool" / "queries_dev.csv"
    if queries.exists():
        with queries.open(encoding="utf-8", newline="") as rows:
            sources["metatool/queries_dev"] = [row["Query"] for row in csv.DictReader(rows)]
    multi = data / "metatool" / "multi_dev.json"
    if multi.exists():
        sources["metatool/multi_dev"] = [item["query"] for item in json.loads(multi.read_text(encoding="utf-8"))]
    return sources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data", help="the shared data folder (default ../shared/data)")
    arguments = parser.parse_args()
    report: dict = {"min_words": MIN_WORDS, "min_confidence": MIN_CONFIDENCE, "english": {}, "foreign": {}}
    refused_english = []
    started = time.perf_counter()
    checked = 0
    for source, tasks in english_sources(arguments.data).items():
        detections = [(task, detect_language(task)) for task in tasks]
        checked += len(tasks)
        refused = [(task, detection) for task, detection in detections if detection.foreign]
        refused_english += [{"source": source, "task": task, "language": d.language, "confidence": round(d.confidence, 3)} for task, d in refused]
        report["english"][source] = {"tasks": len(tasks), "judged": sum(d.language is not None for _, d in detections), "refused": len(refused)}
    for language, tasks in FOREIGN.items():
        detections = [detect_language(task) for task in tasks]
        checked += len(tasks)
        report["foreign"][language] = {
            "tasks": len(tasks),
            "refused": sum(detection.foreign for detection in detections),
            "missed": [task for task, detection in zip(tasks, detections) if not detection.foreign],
        }
    report["english_tasks"] = sum(source["tasks"] for source in report["english"].values())
    report["english_refused"] = refused_english
    report["foreign_tasks"] = sum(len(tasks) for tasks in FOREIGN.values())
    report["foreign_refused"] = sum(entry["refused"] for entry in report["foreign"].values())
    report["ms_per_task"] = round((time.perf_counter() - started) * 1000 / checked, 3)
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
