"""``manage.py attach_collection SLUG COLLECTION [--name NAME] [--preset P] [--json]``
``[--embedder-url URL --embedder-model MODEL [--embedder-key-env VAR]]``.

Creates an agent on an existing Chroma collection (mem0's, PraisonAI's, a plain log or our
own), choosing the field map from the collection's shape, and prints the map it chose. The
``--embedder-*`` options name the OpenAI-compatible endpoint of the collection's own embedding
model (mem0's default is OpenAI ``text-embedding-3-small``), so passes may write new texts to a
collection of another model's vectors. Bad input (unknown collection, taken slug, a preset the
records contradict, a half-filled embedder) exits 2 with one line and creates nothing; Chroma
unreachable exits 1.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from consolidation.shapes import PRESETS
from memoryadmin.agents.selectors.agents import collection_shape
from memoryadmin.agents.services.agents import agent_create
from memoryadmin.core.errors import ServiceError, StoreUnavailable
from memoryadmin.management.commands._cli import bad_input, failed


class Command(BaseCommand):
    help = (
        "Create an agent on an existing Chroma collection. The collection's shape (mem0, "
        "PraisonAI, plain documents, memoryadmin) is detected from its records, or taken from "
        "--preset, and the field map chosen is printed."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="slug of the new agent (lowercase letters, digits, -)")
        parser.add_argument("collection", help="name of the existing Chroma collection")
        parser.add_argument("--name", default="", help="agent name (default: the slug)")
        parser.add_argument(
            "--preset",
            choices=PRESETS,
            default="auto",
            help="how the collection was written (default: auto, detected from its records)",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument(
            "--embedder-url",
            default="",
            help="OpenAI-compatible endpoint of the collection's own embedder",
        )
        parser.add_argument("--embedder-model", default="", help="its model name")
        parser.add_argument(
            "--embedder-key-env",
            default="",
            help="environment variable holding its API key (never stored)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug, collection = options["slug"], options["collection"]
        try:
            report = collection_shape(collection_name=collection, preset=options["preset"])
            agent = agent_create(
                name=options["name"] or slug,
                slug=slug,
                collection_name=collection,
                attach=True,
                field_map=report.field_map,
                embedder={
                    "base_url": options["embedder_url"],
                    "model": options["embedder_model"],
                    "api_key_env": options["embedder_key_env"],
                },
            )
        except StoreUnavailable as exc:
            raise failed(str(exc)) from exc
        except (ValueError, ServiceError) as exc:
            raise bad_input(f"Nothing attached: {_sentence(exc)}") from exc
        if options["json"]:
            out = {
                "agent": agent.slug,
                "name": agent.name,
                "collection": collection,
                "embedder": agent.embedder,
                **report.to_dict(),
            }
            self.stdout.write(json.dumps(out, ensure_ascii=False, sort_keys=True))
            return
        self.stdout.write(
            f"Attached collection {collection!r} as agent {agent.slug!r} ({report.shape} shape)."
        )
        self.stdout.write("Field map:")
        for key, value in report.field_map.to_dict().items():
            shown = ", ".join(value) if isinstance(value, list) else (value or "(the document)")
            self.stdout.write(f"  {key:17} {shown}")
        for note in report.notes:
            self.stdout.write(f"- {note}")


def _sentence(exc: BaseException) -> str:
    text = str(exc).strip()
    return text[:1].upper() + text[1:] if text else type(exc).__name__
